package escalation

import "strconv"

// HostPath is PATH for host commands. The approved executable is run by
// absolute path; PATH only serves the programs it starts itself (gh
// starting git, git starting ssh).
const HostPath = "/usr/bin:/bin"

// gitHardening are git configuration entries passed through
// GIT_CONFIG_COUNT/KEY/VALUE, which take precedence over every
// configuration file, so that a git command run in the workspace cannot be
// made to execute workspace-controlled programs.
var gitHardening = [][2]string{
	{"core.hooksPath", "/dev/null"}, // no hooks from .git/hooks
	{"core.fsmonitor", "false"},     // no fsmonitor helper
	{"protocol.ext.allow", "never"}, // no ext:: transport commands
}

// passThrough are the only variables copied from the coordinator's own
// environment, when set there.
var passThrough = []string{"SSH_AUTH_SOCK"}

// ScrubbedEnv is the complete environment of a host command, in this
// order:
//
//	PATH=/usr/bin:/bin
//	HOME=<home>            (the developer's home directory)
//	USER=<user>, LOGNAME=<user>
//	LANG=C.UTF-8
//	GIT_TERMINAL_PROMPT=0  (no credential prompt: there is no terminal)
//	GIT_CONFIG_COUNT=3 and GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n for
//	  core.hooksPath=/dev/null, core.fsmonitor=false, protocol.ext.allow=never
//	SSH_AUTH_SOCK=<value>  (only when lookup finds it)
//
// Nothing else of the coordinator's environment reaches the command.
// lookup reads the coordinator's environment (os.LookupEnv).
func ScrubbedEnv(home, user string, lookup func(string) (string, bool)) []string {
	env := []string{
		"PATH=" + HostPath,
		"HOME=" + home,
		"USER=" + user,
		"LOGNAME=" + user,
		"LANG=C.UTF-8",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_COUNT=" + strconv.Itoa(len(gitHardening)),
	}
	for i, kv := range gitHardening {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	if lookup != nil {
		for _, name := range passThrough {
			if v, ok := lookup(name); ok && v != "" {
				env = append(env, name+"="+v)
			}
		}
	}
	return env
}
