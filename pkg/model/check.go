package model

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrConfig is wrapped by every error Check returns for a Config it
// cannot run.
var ErrConfig = errors.New("invalid checker configuration")

// Config selects what Check explores.
type Config struct {
	// Fixture binds the constants; nil means Lazaret.cfg's (CfgFixture).
	Fixture *Fixture

	// MaxDepth bounds the exploration to states at most MaxDepth steps
	// from Init; 0 explores the whole reachable state space.
	MaxDepth int

	// Overrides replaces actions of Next, by TLA+ name, with other
	// functions. It exists to test the checker itself: a deliberately
	// broken action must make Check report the invariant it breaks.
	Overrides map[string]ActionFunc
}

// Result describes one exploration.
type Result struct {
	// States is the number of distinct states found, initial states
	// included (TLC's "distinct states found").
	States int

	// Generated is the number of states computed: initial states plus
	// every successor of every explored state, duplicates included. TLC's
	// "states generated" may differ, because TLC evaluates the duplicated
	// Resume disjuncts of Next twice.
	Generated int

	// Depth is the largest number of steps from Init to a state found. TLC
	// reports this plus one, since it counts the initial state as depth 1.
	Depth int

	// Complete reports that every reachable state was explored: false only
	// when MaxDepth cut the exploration short.
	Complete bool

	// Elapsed is the wall-clock time of the exploration.
	Elapsed time.Duration
}

// Violation is the error Check returns when an invariant fails: the
// invariant and a shortest behaviour from Init to a state violating it.
type Violation struct {
	Invariant string
	// Trace[0] is the initial state (Step "Init"); each later entry is the
	// step taken and the state it reached. The last state violates
	// Invariant.
	Trace []TraceStep
}

// TraceStep is one state of a counterexample and the step that reached it.
type TraceStep struct {
	Step  string // "Init", or an action with its arguments, e.g. "StartSandbox(D1)"
	State State
}

func (v *Violation) Error() string {
	return fmt.Sprintf("invariant %s is violated after %d steps", v.Invariant, len(v.Trace)-1)
}

// Format prints the counterexample the way TLC does: the invariant, then
// each state numbered from 1 with the step that reached it.
func (v *Violation) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Error: Invariant %s is violated.\n", v.Invariant)
	fmt.Fprintf(&b, "Error: The behavior up to this point is:\n")
	for i, ts := range v.Trace {
		fmt.Fprintf(&b, "State %d: <%s>\n%s\n", i+1, ts.Step, ts.State)
	}
	return b.String()
}

// Check explores the state space of the model breadth first from Init,
// checking every invariant of Lazaret.cfg on every state found. It returns
// the exploration's Result and, when an invariant fails, a *Violation
// carrying a shortest trace to the first violating state found.
func Check(cfg Config) (Result, error) {
	start := time.Now()
	f := CfgFixture()
	if cfg.Fixture != nil {
		f = *cfg.Fixture
	}
	m, err := New(f)
	if err != nil {
		return Result{}, fmt.Errorf("checker fixture: %w", errors.Join(ErrConfig, err))
	}
	if cfg.MaxDepth < 0 {
		return Result{}, fmt.Errorf("checker MaxDepth %d is negative: %w", cfg.MaxDepth, ErrConfig)
	}
	fns := make([]ActionFunc, len(nextActions))
	for i, a := range nextActions {
		fns[i] = a.fn
	}
	for name, fn := range cfg.Overrides {
		i := actionIndex(name)
		if i < 0 {
			return Result{}, fmt.Errorf("checker override %q names no action of Next: %w", name, ErrConfig)
		}
		if fn == nil {
			return Result{}, fmt.Errorf("checker override %q is nil: %w", name, ErrConfig)
		}
		fns[i] = fn
	}
	e := explorer{m: m, fns: fns, visited: make(map[Key]struct{})}
	res, err := e.run(cfg.MaxDepth)
	res.Elapsed = time.Since(start)
	return res, err
}

// explorer holds the state of one breadth-first search. States are
// numbered in the order they are found; keys[i], parent[i] and via[i] are
// the encoding of state i, the state it was found from (-1 for initial
// states) and the instance of the step that found it. Since states are
// found in breadth-first order, keys is also the queue.
type explorer struct {
	m       *Model
	fns     []ActionFunc
	visited map[Key]struct{}
	keys    []Key
	parent  []int32
	via     []uint16
}

func (e *explorer) run(maxDepth int) (Result, error) {
	var res Result
	res.Complete = true
	for _, st := range e.m.Init() {
		res.Generated++
		if name, bad := e.m.Violated(&st); bad {
			return res, &Violation{Invariant: name, Trace: []TraceStep{{Step: "Init", State: st}}}
		}
		if e.add(st.Key(), -1, 0) {
			res.States++
		}
	}
	depth := 0
	levelEnd := len(e.keys)
	// next is declared once: the invariants take its address, which makes
	// it escape to the heap.
	var next State
	for i := 0; i < len(e.keys); i++ {
		if i == levelEnd {
			depth++
			levelEnd = len(e.keys)
		}
		st := e.keys[i].State()
		for n, in := range instances {
			var ok bool
			next, ok = e.fns[in.action](e.m, st, in.args)
			if !ok {
				continue
			}
			res.Generated++
			if maxDepth > 0 && depth >= maxDepth {
				// Beyond the bound: note whether it is a state not yet
				// found (an ill-typed one never was), check nothing.
				if !e.m.TypeOK(&next) {
					res.Complete = false
				} else if _, seen := e.visited[next.Key()]; !seen {
					res.Complete = false
				}
				continue
			}
			// TypeOK first: Key is injective only on well-typed states.
			if !e.m.TypeOK(&next) {
				return res, e.violation("TypeOK", i, n, next)
			}
			k := next.Key()
			if _, seen := e.visited[k]; seen {
				continue
			}
			if name, bad := e.m.Violated(&next); bad {
				return res, e.violation(name, i, n, next)
			}
			e.add(k, int32(i), uint16(n))
			res.States++
			res.Depth = depth + 1
		}
	}
	return res, nil
}

func (e *explorer) add(k Key, parent int32, via uint16) bool {
	if _, seen := e.visited[k]; seen {
		return false
	}
	e.visited[k] = struct{}{}
	e.keys = append(e.keys, k)
	e.parent = append(e.parent, parent)
	e.via = append(e.via, via)
	return true
}

// violation builds the trace to state from, then the step n to bad.
func (e *explorer) violation(name string, from, n int, bad State) *Violation {
	var rev []TraceStep
	for i := int32(from); i >= 0; i = e.parent[i] {
		ts := TraceStep{Step: "Init", State: e.keys[i].State()}
		if e.parent[i] >= 0 {
			ts.Step = instanceString(int(e.via[i]))
		}
		rev = append(rev, ts)
	}
	trace := make([]TraceStep, 0, len(rev)+1)
	for i := len(rev) - 1; i >= 0; i-- {
		trace = append(trace, rev[i])
	}
	trace = append(trace, TraceStep{Step: instanceString(n), State: bad})
	return &Violation{Invariant: name, Trace: trace}
}

func instanceString(n int) string {
	in := instances[n]
	return callString(nextActions[in.action].Name, in.params)
}
