// Command testinternet builds the test internet of package netlab in the
// network namespace it runs in, prints "ready" once every host answers,
// and removes it on SIGINT or SIGTERM. It needs root; tests run by any
// user then use it when LAZARET_TEST_INTERNET=1 is set (.ci/run does
// this for the unprivileged run).
//
// With one argument it prints instead, and builds nothing: "ca", the
// test CA's certificate (PEM); "secret", the value its HTTPS services
// accept as the real credential (bench/broker uses both).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/netpath"
)

func main() { cmdmain.Main("testinternet", run) }

func run() error {
	switch args := os.Args[1:]; {
	case len(args) == 1 && args[0] == "ca":
		_, err := os.Stdout.Write(netlab.TestCAPEM())
		return err
	case len(args) == 1 && args[0] == "secret":
		_, err := fmt.Println(netlab.BrokerSecret)
		return err
	case len(args) != 0:
		return fmt.Errorf("unexpected arguments %q: testinternet takes none, or one of ca, secret", args)
	}
	host, err := netpath.CurrentNetNS()
	if err != nil {
		return err
	}
	defer host.Close()
	in, err := netlab.StartInternet(host)
	if err != nil {
		return err
	}
	defer in.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	fmt.Println("ready")
	<-sig
	return nil
}
