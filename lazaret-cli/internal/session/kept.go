package session

// KeptPaths are the `kept` lines of a start report: host paths the new
// generation isolated only because an earlier one did (the sandbox's
// changes to ignore files or the index would have exposed them).
type KeptPaths struct {
	// Paths are the named paths, a directory ending in "/".
	Paths []string
	// More counts the paths the report did not name.
	More int
}

func (k *KeptPaths) add(p string) { k.Paths = append(k.Paths, p) }
func (k *KeptPaths) more(n int)   { k.More += n }
