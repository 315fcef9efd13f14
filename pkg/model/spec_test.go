package model

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The tests in this file read the spec itself and hold the Go
// transliteration to it: the actions of Next, the INVARIANTS of the
// configuration, the conjuncts of every action and the variables each
// action may change.

const (
	specPath = "../../tla/Lazaret.tla"
	cfgPath  = "../../tla/Lazaret.cfg"
)

// spec is the part of Lazaret.tla the tests need.
type spec struct {
	vars    []string            // VARIABLES, in order
	bodies  map[string][]string // definition name -> body lines
	order   []string            // definition names in order
	actions []string            // actions of Next, first occurrence order
}

var (
	defRE     = regexp.MustCompile(`^([A-Za-z]\w*)(\([^)]*\))?\s*==`)
	identRE   = regexp.MustCompile(`[A-Za-z_]\w*`)
	primedRE  = regexp.MustCompile(`([A-Za-z_]\w*)'`)
	unchRE    = regexp.MustCompile(`(?s)UNCHANGED\s*<<(.*?)>>`)
	conjRE    = regexp.MustCompile(`^    /\\ `)
	spaceRE   = regexp.MustCompile(`\s+`)
	cfgItemRE = regexp.MustCompile(`^\s+([A-Za-z]\w*)\s*$`)
)

func readSpec(t *testing.T) *spec {
	t.Helper()
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatalf("reading the spec: %v", err)
	}
	sp := &spec{bodies: map[string][]string{}}
	lines := strings.Split(string(raw), "\n")
	cur := ""
	inVars := false
	for _, ln := range lines {
		if ln == "VARIABLES" {
			inVars = true
			continue
		}
		if inVars {
			if strings.TrimSpace(ln) == "" {
				inVars = false
				continue
			}
			for _, v := range strings.Split(ln, ",") {
				if v = strings.TrimSpace(v); v != "" {
					sp.vars = append(sp.vars, v)
				}
			}
			continue
		}
		if m := defRE.FindStringSubmatch(ln); m != nil {
			cur = m[1]
			sp.order = append(sp.order, cur)
			sp.bodies[cur] = []string{strings.TrimPrefix(ln, m[0])}
			continue
		}
		if ln != "" && ln[0] != ' ' {
			cur = ""
		}
		if cur != "" {
			sp.bodies[cur] = append(sp.bodies[cur], ln)
		}
	}
	sp.actions = sp.expandNext("Next", map[string]bool{})
	if len(sp.vars) == 0 || len(sp.actions) == 0 {
		t.Fatalf("the spec at %s has no VARIABLES or no actions in Next", specPath)
	}
	return sp
}

func (sp *spec) body(name string) string { return strings.Join(sp.bodies[name], "\n") }

// refs returns the definitions a definition's body names, in order.
func (sp *spec) refs(name string) []string {
	var out []string
	for _, id := range identRE.FindAllString(sp.body(name), -1) {
		if _, ok := sp.bodies[id]; ok && id != name && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func (sp *spec) directPrimes(name string) []string {
	var out []string
	for _, m := range primedRE.FindAllStringSubmatch(sp.body(name), -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// mentionsPrime reports whether a definition primes a variable, itself
// or through a definition it names.
func (sp *spec) mentionsPrime(name string, seen map[string]bool) bool {
	if seen[name] {
		return false
	}
	seen[name] = true
	if len(sp.directPrimes(name)) > 0 {
		return true
	}
	for _, r := range sp.refs(name) {
		if sp.mentionsPrime(r, seen) {
			return true
		}
	}
	return false
}

// expandNext lists the actions of a disjunction of actions: a definition
// that primes variables in its own body is an action; one that only names
// actions (DomainProgress, RequestProgress, ...) is expanded.
func (sp *spec) expandNext(name string, seen map[string]bool) []string {
	var out []string
	for _, r := range sp.refs(name) {
		if seen[r] || !sp.mentionsPrime(r, map[string]bool{}) {
			continue
		}
		seen[r] = true
		if len(sp.directPrimes(r)) > 0 {
			out = append(out, r)
			continue
		}
		out = append(out, sp.expandNext(r, seen)...)
	}
	return out
}

// frame returns the variables an action primes, directly or through the
// definitions it names (ConsumeRuntimeFault).
func (sp *spec) frame(name string) []string {
	set := map[string]bool{}
	var walk func(string, map[string]bool)
	walk = func(n string, seen map[string]bool) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, v := range sp.directPrimes(n) {
			set[v] = true
		}
		for _, r := range sp.refs(n) {
			walk(r, seen)
		}
	}
	walk(name, map[string]bool{})
	var out []string
	for _, v := range sp.vars {
		if set[v] {
			out = append(out, v)
		}
	}
	return out
}

func (sp *spec) unchanged(name string) []string {
	var out []string
	for _, m := range unchRE.FindAllStringSubmatch(sp.body(name), -1) {
		for _, v := range strings.Split(m[1], ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// conjuncts returns the top-level conjuncts of a definition, each joined
// onto one line with whitespace collapsed.
func (sp *spec) conjuncts(name string) []string {
	var out []string
	cur := ""
	for _, ln := range sp.bodies[name] {
		switch {
		case conjRE.MatchString(ln):
			if cur != "" {
				out = append(out, cur)
			}
			cur = strings.TrimSpace(ln)[len(`/\ `):]
		case cur != "" && strings.TrimSpace(ln) != "":
			cur += " " + strings.TrimSpace(ln)
		}
	}
	if cur != "" {
		out = append(out, cur)
	}
	for i := range out {
		out[i] = normalize(out[i])
	}
	return out
}

func normalize(s string) string { return strings.TrimSpace(spaceRE.ReplaceAllString(s, " ")) }

func TestSpecActionsMatchNext(t *testing.T) {
	sp := readSpec(t)
	var goNames []string
	for _, a := range Actions() {
		goNames = append(goNames, a.Name)
	}
	if !slices.Equal(goNames, sp.actions) {
		t.Fatalf("actions of Next differ from the spec\n go: %v\nspec: %v", goNames, sp.actions)
	}
	for _, a := range Actions() {
		// The parameter list of the definition line, e.g. "(r, cmd)".
		raw, _ := os.ReadFile(specPath)
		re := regexp.MustCompile(`(?m)^` + a.Name + `\(([^)]*)\)\s*==`)
		m := re.FindSubmatch(raw)
		if m == nil {
			t.Errorf("action %s: no definition line with parameters in the spec", a.Name)
			continue
		}
		var want []string
		for _, p := range strings.Split(string(m[1]), ",") {
			want = append(want, strings.TrimSpace(p))
		}
		var got []string
		for _, p := range a.Params {
			got = append(got, p.String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("action %s: parameters %v, spec has %v", a.Name, got, want)
		}
	}
}

func TestSpecVariablesMatchState(t *testing.T) {
	sp := readSpec(t)
	var goNames []string
	for v := range NumVars {
		goNames = append(goNames, v.String())
	}
	if !slices.Equal(goNames, sp.vars) {
		t.Fatalf("VARIABLES differ\n go: %v\nspec: %v", goNames, sp.vars)
	}
}

func TestSpecInvariantsMatchConfig(t *testing.T) {
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatalf("reading the configuration: %v", err)
	}
	var want []string
	in := false
	for _, ln := range strings.Split(string(raw), "\n") {
		switch {
		case strings.TrimSpace(ln) == "INVARIANTS":
			in = true
		case in && cfgItemRE.MatchString(ln):
			want = append(want, cfgItemRE.FindStringSubmatch(ln)[1])
		case in && strings.TrimSpace(ln) != "" && !strings.HasPrefix(strings.TrimSpace(ln), `\*`):
			in = false
		}
	}
	var got []string
	for _, inv := range Invariants() {
		got = append(got, inv.Name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("invariants differ from %s INVARIANTS\n go: %v\ncfg: %v", cfgPath, got, want)
	}
	// Safety is TypeOK and the rest, conjunct by conjunct.
	sp := readSpec(t)
	if safety := sp.conjuncts("Safety"); !slices.Equal(safety, want) {
		t.Fatalf("Safety's conjuncts %v differ from INVARIANTS %v", safety, want)
	}
}

// TestSpecFramesComplete checks the spec itself: every action primes or
// leaves UNCHANGED each variable exactly once. The checker's frame test
// below relies on it.
func TestSpecFramesComplete(t *testing.T) {
	sp := readSpec(t)
	for _, a := range sp.actions {
		count := map[string]int{}
		for _, v := range sp.frame(a) {
			count[v]++
		}
		for _, v := range sp.unchanged(a) {
			count[v]++
		}
		for _, v := range sp.vars {
			if count[v] != 1 {
				t.Errorf("spec action %s: variable %s is primed or UNCHANGED %d times", a, v, count[v])
			}
		}
	}
}

// TestActionsQuoteSpec holds Init and each Go action to the text of its
// TLA+ definition: every conjunct other than UNCHANGED must be quoted,
// whitespace aside, in the comments of the Go method of the same name (of
// initState for Init), which is where the code transliterating it sits.
func TestActionsQuoteSpec(t *testing.T) {
	sp := readSpec(t)
	fset := token.NewFileSet()
	files, err := filepath.Glob("actions_*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("listing actions_*.go: %v", err)
	}
	files = append(files, "state.go") // initState, for Init
	comments := map[string]string{}
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			var b strings.Builder
			for _, cg := range f.Comments {
				if cg.Pos() >= fn.Pos() && cg.End() <= fn.End() {
					for _, c := range cg.List {
						b.WriteString(strings.TrimPrefix(c.Text, "//"))
						b.WriteByte(' ')
					}
				}
			}
			comments[fn.Name.Name] = normalize(b.String())
		}
	}
	comments["Init"] = comments["initState"]
	for _, a := range append([]string{"Init"}, sp.actions...) {
		text, ok := comments[a]
		if !ok || text == "" {
			t.Errorf("%s has no commented Go function", a)
			continue
		}
		for _, c := range sp.conjuncts(a) {
			if strings.HasPrefix(c, "UNCHANGED") {
				continue
			}
			if !strings.Contains(text, c) {
				t.Errorf("action %s: conjunct not quoted in its Go method: %s", a, c)
			}
		}
	}
}

// TestFramesRespected explores the whole fixture through Successors and
// checks, for every step, that the variables the Go action changed are
// among those the TLA+ action primes: what the spec leaves UNCHANGED, the
// Go leaves unchanged. It also checks the Key encoding round-trips on
// every reachable state, and that the Successors path finds as many states
// as Check.
func TestFramesRespected(t *testing.T) {
	sp := readSpec(t)
	frames := map[string]VarSet{}
	byName := map[string]Var{}
	for v := range NumVars {
		byName[v.String()] = v
	}
	for _, a := range sp.actions {
		var set VarSet
		for _, v := range sp.frame(a) {
			set = set.With(byName[v])
		}
		frames[a] = set
	}
	seen := map[State]bool{}
	queue := Init()
	for _, st := range queue {
		seen[st] = true
	}
	used := map[string]VarSet{}
	fired := map[string]bool{}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		if got := st.Key().State(); got != st {
			t.Fatalf("Key round trip changed the state\nfrom:\n%s\nto:\n%s", st, got)
		}
		for _, step := range Successors(st) {
			changed := Changed(&st, &step.Next)
			used[step.Action] |= changed
			fired[step.String()] = true
			if extra := changed &^ frames[step.Action]; extra != 0 {
				t.Fatalf("%s changed %v, which the spec leaves UNCHANGED\nfrom:\n%s", step, extra, st)
			}
			if !seen[step.Next] {
				seen[step.Next] = true
				queue = append(queue, step.Next)
			}
		}
	}
	res, err := Check(Config{})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(seen) != res.States {
		t.Errorf("Successors reach %d states, Check found %d", len(seen), res.States)
	}
	for n := range instances {
		if name := instanceString(n); !fired[name] {
			t.Logf("action instance %s is never enabled under Lazaret.cfg", name)
		}
	}
	for _, a := range sp.actions {
		if used[a] == 0 {
			t.Logf("action %s never changes a reachable state under Lazaret.cfg", a)
		} else if used[a] != frames[a] {
			t.Logf("action %s: primes %v, changes only %v on reachable states", a, frames[a], used[a])
		}
	}
}
