package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// sharedFlags are the flags defined once in flags.go.
var sharedFlags = map[string]cli.Flag{
	"profile":      profileFlag(),
	"workspace":    workspaceFlag(),
	"config":       configFileFlag(),
	"storage-root": storageRootFlag(),
	"json":         jsonFlag(""),
}

// ownMeaning lists the flags that carry a shared name with another
// meaning, and why.
var ownMeaning = map[string]string{
	"config init --profile": "names the starter profile the file will declare; no configuration exists yet to default from",
}

// nearSynonyms are spellings that would be a second name for a shared
// flag, compared after lowering and dropping - and _.
var nearSynonyms = map[string]string{
	"cfg": "config", "conf": "config", "configfile": "config", "configpath": "config", "configuration": "config",
	"prof": "profile", "profilename": "profile", "profiles": "profile",
	"ws": "workspace", "workspacedir": "workspace", "worktree": "workspace", "repo": "workspace",
	"outputjson": "json", "jsonoutput": "json", "asjson": "json", "formatjson": "json", "j": "json",
	"storage": "storage-root", "storagedir": "storage-root", "storagepath": "storage-root",
	"dataroot": "storage-root", "datadir": "storage-root", "datahome": "storage-root", "root": "storage-root",
}

func normalize(name string) string {
	return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(name))
}

type flagAt struct {
	path string
	cmd  *cli.Command
	flag cli.Flag
}

// everyFlag walks the whole command tree of App, hidden commands too.
func everyFlag() (flags []flagAt, cmds map[string]*cli.Command) {
	cmds = map[string]*cli.Command{}
	var walk func(prefix string, cs []*cli.Command)
	walk = func(prefix string, cs []*cli.Command) {
		for _, c := range cs {
			p := strings.TrimSpace(prefix + " " + c.Name)
			cmds[p] = c
			for _, f := range c.Flags {
				flags = append(flags, flagAt{p, c, f})
			}
			walk(p, c.Subcommands)
		}
	}
	app := App()
	for _, f := range app.Flags {
		flags = append(flags, flagAt{"", nil, f})
	}
	walk("", app.Commands)
	return flags, cmds
}

func takesValueOf(f cli.Flag) bool {
	d, ok := f.(cli.DocGenerationFlag)
	return ok && d.TakesValue()
}

func TestFlagsAreUniform(t *testing.T) {
	flags, _ := everyFlag()
	takesValue := map[string]flagAt{}
	canonicalNorm := map[string]string{}
	for name := range sharedFlags {
		canonicalNorm[normalize(name)] = name
	}
	for _, fa := range flags {
		names := fa.flag.Names()
		where := "lazaret-cli " + fa.path + " --" + names[0]
		for _, n := range names {
			// A near-synonym or a respelling of a shared flag, as a name
			// or as an alias.
			if shared, ok := nearSynonyms[normalize(n)]; ok {
				t.Errorf("%s: %q is a second name for --%s; use --%s", where, n, shared, shared)
			}
			if shared, ok := canonicalNorm[normalize(n)]; ok && n != shared {
				t.Errorf("%s: %q respells --%s", where, n, shared)
			}
			// Completion skips a flag's value by its name alone.
			if prev, ok := takesValue[n]; ok && takesValueOf(prev.flag) != takesValueOf(fa.flag) {
				t.Errorf("%s takes a value and lazaret-cli %s --%s does not, or the reverse", where, prev.path, n)
			}
			takesValue[n] = fa
		}
		want, shared := sharedFlags[names[0]]
		if !shared {
			continue
		}
		if why, ok := ownMeaning[strings.TrimSpace(fa.path+" --"+names[0])]; ok {
			if reflect.TypeOf(fa.flag) != reflect.TypeOf(want) || len(names) != 1 {
				t.Errorf("%s (%s) must still be a %T without aliases", where, why, want)
			}
			continue
		}
		if reflect.TypeOf(fa.flag) != reflect.TypeOf(want) {
			t.Errorf("%s is a %T, want %T", where, fa.flag, want)
			continue
		}
		if len(names) != 1 {
			t.Errorf("%s has aliases %v", where, names[1:])
		}
		got := reflect.ValueOf(fa.flag).Elem()
		exp := reflect.ValueOf(want).Elem()
		if names[0] == "json" {
			usage := got.FieldByName("Usage").String()
			if !strings.HasPrefix(usage, jsonUsage) || len(usage) == len(jsonUsage) {
				t.Errorf("%s: usage %q must be %q followed by the shape printed", where, usage, jsonUsage)
			}
			got.FieldByName("Usage").SetString(jsonUsage)
		}
		if !reflect.DeepEqual(got.Interface(), exp.Interface()) {
			t.Errorf("%s is not the flag %s defines:\n got %+v\nwant %+v", where, "flags.go", got.Interface(), exp.Interface())
		}
	}
}

// TestDomainCommandsTakeConfig: every command that runs does so with the
// configuration, so every one accepts --config; only these do not.
func TestDomainCommandsTakeConfig(t *testing.T) {
	without := map[string]string{
		"doctor probe": "runs one namespace probe for doctor, inside new namespaces",
		"completion":   "prints a completion script",
	}
	_, cmds := everyFlag()
	for path, c := range cmds {
		if c.Action == nil {
			continue
		}
		has := false
		for _, f := range c.Flags {
			if f.Names()[0] == "config" {
				has = true
			}
		}
		if _, exempt := without[path]; exempt {
			if has {
				t.Errorf("lazaret-cli %s is listed as not taking --config but does", path)
			}
			continue
		}
		if !has {
			t.Errorf("lazaret-cli %s does not accept --config", path)
		}
	}
	for path := range without {
		if cmds[path] == nil {
			t.Errorf("lazaret-cli %s is listed as not taking --config but does not exist", path)
		}
	}
}
