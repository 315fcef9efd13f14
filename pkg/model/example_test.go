package model_test

import (
	"fmt"

	"lazaret.dev/pkg/model"
)

// Check explores Lazaret.cfg's fixture and checks every invariant.
func ExampleCheck() {
	res, err := model.Check(model.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d distinct states, depth %d, complete %v\n", res.States, res.Depth, res.Complete)
	// Output: 58452 distinct states, depth 46, complete true
}

// Successors lists the steps of Next from a state, by action name and
// arguments, as a trace validator compares them with recorded events.
func ExampleSuccessors() {
	st := model.Init()[0]
	for _, step := range model.Successors(st) {
		fmt.Println(step, step.Next.SessionPhase[step.Args.Session], step.Next.DomainPhase[model.D1])
	}
	// Output:
	// StartNewDomain(S1) Waiting Starting
	// StartNewDomain(S2) Waiting Starting
}
