package netsidecar

import (
	"os"

	"lazaret.dev/pkg/handoff"
)

// Descriptor names of the sidecar's hand-off.
const (
	fileChannel = "control"
	filePolicy  = "policy"
	fileNames   = "names"
	fileBroker  = "broker"
)

// Layout is the hand-off of lazaret-netsidecar: no flags, descriptor 3
// its end of the control channel, descriptor 4 the sealed policy memfd,
// descriptor 5 the name log (append only; see NameLog), descriptor 6 the
// sealed memfd of the credential broker's configuration (empty when the
// profile brokers no credential).
var Layout = handoff.Layout{
	Child: "lazaret-netsidecar",
	Files: []string{fileChannel, filePolicy, fileNames, fileBroker},
}

// Descriptors is what a parent hands lazaret-netsidecar.
type Descriptors struct {
	// Channel is the sidecar's end of the control channel (ChannelPair).
	Channel *os.File
	// Policy is the sealed memfd of the derived policy (SealPolicy).
	Policy *os.File
	// Names is the name log the pinning resolver records its decisions
	// in, opened for appending. A policy without names writes nothing.
	Names *os.File
	// Broker is the sealed memfd of the credential broker's
	// configuration (SealBroker): the brokered credentials' real values
	// and the generation's broker CA key, which exist nowhere else but
	// in the coordinator's memory. Empty when nothing is brokered.
	Broker *os.File
}

// Argv is the sidecar's command line after its executable: empty, and
// rendered by Layout so that a flag added later has one definition.
func (d *Descriptors) Argv() ([]string, error) { return Layout.Argv(nil, nil) }

// ExtraFiles is exec.Cmd.ExtraFiles for the sidecar: Channel, Policy,
// Names, Broker.
func (d *Descriptors) ExtraFiles() ([]*os.File, error) {
	return Layout.ExtraFiles(map[string]*os.File{fileChannel: d.Channel, filePolicy: d.Policy, fileNames: d.Names, fileBroker: d.Broker})
}

// Inherit takes Channel, Policy, Names and Broker from this process's
// descriptors, all close-on-exec: none reaches a helper the sidecar
// starts.
func (d *Descriptors) Inherit() error {
	files, err := Layout.Inherit()
	if err != nil {
		return err
	}
	d.Channel, d.Policy, d.Names, d.Broker = files[fileChannel], files[filePolicy], files[fileNames], files[fileBroker]
	return nil
}
