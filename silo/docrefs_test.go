package silo_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The docs point at the code that gives each guarantee — a file, a
// function in it, a method, a field, an option — and say what a user calls.
// Code moves on and names change; a pointer left behind sends the reader to
// nothing. TestDocsNameWhatExists reads README.md and docs/ (not the
// performance log, whose entries are history, naming what was then) and
// checks that:
//
//   - every file named (`silo/turn.go`) exists;
//   - every `file.go: name` declares name;
//   - every `pkg.Name` and `pkg.Type.Member` of the library's packages, and
//     every `Type.Member` of one of their types (exported or not:
//     `partition.setContext`, `Config.Logger`), names a declaration, a
//     method or a field;
//   - every code block that opens with a comment naming its file
//     (`// runTurn and endTurn, silo/turn.go`) quotes lines of that file.
func TestDocsNameWhatExists(t *testing.T) {
	root := ".."
	code := parseLibrary(t, root)
	docs := []string{filepath.Join(root, "README.md")}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range more {
		if filepath.Base(d) != "performance-log.md" {
			docs = append(docs, d)
		}
	}
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, d)
		for _, p := range checkDoc(root, string(b), code) {
			t.Errorf("%s: %s", name, p)
		}
	}
}

// library is what the library's packages declare, by package, by type and
// by file.
type library struct {
	pkgs    map[string]map[string]bool // package name → its top-level names
	members map[string]map[string]bool // type name (any package) → methods and fields
	files   map[string]map[string]bool // path from the root → the names it declares
}

// libraryDirs are the directories whose names the docs may quote: the
// library's, the examples', and the chaos program's (parsed only: it is of
// the bench module).
var libraryDirs = []string{"activation", "clock", "directory", "grain", "idle", "queues", "silo", "silo/silotest", "examples/game", "examples/counter", "internal/prefetch", "internal/ctxerr", "bench/chaos"}

func parseLibrary(t *testing.T, root string) *library {
	t.Helper()
	lib := &library{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}, files: map[string]map[string]bool{}}
	fset := token.NewFileSet()
	for _, dir := range libraryDirs {
		paths, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
			lib.addFile(rel, f, !strings.HasSuffix(path, "_test.go"))
		}
	}
	return lib
}

func (lib *library) addFile(rel string, f *ast.File, public bool) {
	declared := map[string]bool{}
	lib.files[rel] = declared
	pkg := strings.TrimSuffix(f.Name.Name, "_test")
	if lib.pkgs[pkg] == nil {
		lib.pkgs[pkg] = map[string]bool{}
	}
	top := func(n string) {
		declared[n] = true
		if public || isTestFunc(n) { // the docs name tests and benchmarks to run
			lib.pkgs[pkg][n] = true
		}
	}
	member := func(typ, n string) {
		declared[n] = true
		if lib.members[typ] == nil {
			lib.members[typ] = map[string]bool{}
		}
		lib.members[typ][n] = true
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				top(d.Name.Name)
				continue
			}
			member(receiverType(d.Recv.List[0].Type), d.Name.Name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					top(s.Name.Name)
					if lib.members[s.Name.Name] == nil {
						lib.members[s.Name.Name] = map[string]bool{}
					}
					addFields(s.Type, func(n string) { member(s.Name.Name, n) })
				case *ast.ValueSpec:
					for _, n := range s.Names {
						top(n.Name)
					}
				}
			}
		}
	}
}

// addFields names the fields of a struct type (an embedded one by its
// type's name) and the methods of an interface type.
func addFields(e ast.Expr, add func(string)) {
	var list *ast.FieldList
	switch e := e.(type) {
	case *ast.StructType:
		list = e.Fields
	case *ast.InterfaceType:
		list = e.Methods
	default:
		return
	}
	for _, f := range list.List {
		if len(f.Names) == 0 {
			add(receiverType(f.Type))
		}
		for _, n := range f.Names {
			add(n.Name)
		}
	}
}

// receiverType is the name of the type in a receiver or an embedded field:
// *T, T[K], pkg.T → T.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

var (
	codeSpan  = regexp.MustCompile("`([^`\n]+)`")
	goFile    = regexp.MustCompile(`^((?:[a-z_]+/)*[a-z_0-9]+\.go)(?:: ([A-Za-z_][A-Za-z0-9_]*))?`)
	selector  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?(?:\(|\[|$)`)
	namesFile = regexp.MustCompile(`^// .*?((?:[a-z_]+/)+[a-z_0-9]+\.go)\s*$`)
)

// checkDoc returns what doc names that does not exist.
func checkDoc(root, doc string, lib *library) []string {
	var problems []string
	for _, block := range codeBlocks(doc) {
		problems = append(problems, checkQuote(root, block)...)
	}
	for _, m := range codeSpan.FindAllStringSubmatch(withoutCodeBlocks(doc), -1) {
		span := m[1]
		if f := goFile.FindStringSubmatch(span); f != nil {
			problems = append(problems, checkFileRef(root, f[1], f[2], lib)...)
			continue
		}
		s := selector.FindStringSubmatch(span)
		if s == nil {
			continue
		}
		a, b, c := s[1], s[2], s[3]
		if names, ok := lib.pkgs[a]; ok && a != "silo" || ok && isExported(b) {
			// pkg.Name, pkg.Type.Member (silo.X only when X is exported:
			// `silo.go` aside, a lowercase silo.x is prose about the value)
			if !names[b] {
				problems = append(problems, "`"+span+"`: package "+a+" declares no "+b)
			} else if c != "" && !lib.members[b][c] {
				problems = append(problems, "`"+span+"`: "+a+"."+b+" has no method or field "+c)
			}
			continue
		}
		if members, ok := lib.members[a]; ok && c == "" && !members[b] && !lib.members[strings.ToUpper(a[:1])+a[1:]][b] {
			// (a lowercase name is also a variable of its capitalized
			// type: chain.Find, on a queues.Chain)
			problems = append(problems, "`"+span+"`: type "+a+" has no method or field "+b)
		}
	}
	return problems
}

func isTestFunc(n string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

func isExported(s string) bool { return s != "" && strings.ToUpper(s[:1]) == s[:1] }

// checkFileRef checks a file named in the docs, and the name it is said to
// declare.
func checkFileRef(root, path, name string, lib *library) []string {
	if !strings.Contains(path, "/") {
		return nil // a bare file name, in prose about a package already named
	}
	if _, err := os.Stat(filepath.Join(root, path)); err != nil {
		return []string{"`" + path + "`: no such file"}
	}
	if name == "" {
		return nil
	}
	declared, parsed := lib.files[path]
	if parsed && !declared[name] {
		return []string{"`" + path + ": " + name + "`: the file declares no " + name}
	}
	return nil
}

// codeBlocks returns the fenced code blocks of doc, each as its lines.
func codeBlocks(doc string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if in {
				blocks = append(blocks, cur)
				cur = nil
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, l)
		}
	}
	return blocks
}

// withoutCodeBlocks is doc with its fenced code blocks left out: what they
// hold is Go or shell, not references.
func withoutCodeBlocks(doc string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// checkQuote checks a code block that opens with a comment naming a file:
// each of its lines, comments and spacing aside, is a line of the file (or
// the start of one, for a line cut short), "..." standing for what was left
// out.
func checkQuote(root string, block []string) []string {
	if len(block) == 0 {
		return nil
	}
	m := namesFile.FindStringSubmatch(strings.TrimSpace(block[0]))
	if m == nil {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(root, m[1]))
	if err != nil {
		return []string{"a code block quotes " + m[1] + ": no such file"}
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = codeOf(l); l != "" {
			lines = append(lines, l)
		}
	}
	var problems []string
	for _, q := range block[1:] {
		q = codeOf(q)
		if q == "" || q == "..." {
			continue
		}
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, q) {
				found = true
				break
			}
		}
		if !found {
			problems = append(problems, "a code block quotes "+m[1]+" with a line it does not hold: "+q)
		}
	}
	return problems
}

// codeOf is a line of Go with its comment and spacing left out.
func codeOf(l string) string {
	if i := strings.Index(l, "//"); i >= 0 {
		l = l[:i]
	}
	return strings.Join(strings.Fields(l), " ")
}

// The checker itself finds each kind of pointer to nothing, and passes the
// same kinds of pointer when they lead somewhere.
func TestCheckDocFindsWhatDoesNotExist(t *testing.T) {
	lib := parseLibrary(t, "..")
	good := "`silo/turn.go`, `silo/turn.go: runTurn`, `silo.WithStatelessWorker`, " +
		"`grain.Context.Silo`, `partition.setContext`, `Config.Logger`, `chain.Find(x)`, " +
		"`silo.BenchmarkTell`, `s.whatever`\n" +
		"```go\n// runTurn, silo/turn.go\nw.begin() // a comment of the doc's own\n...\nif !w.end() {\n```\n"
	if p := checkDoc("..", good, lib); len(p) != 0 {
		t.Errorf("problems found in references that lead somewhere: %q", p)
	}
	bad := "`silo/nope.go`, `silo/turn.go: nope`, `silo.WithNope`, `grain.Context.Nope`, " +
		"`partition.nope`, `Config.Nope`\n" +
		"```go\n// runTurn, silo/turn.go\nw.begin()\nw.nope()\n```\n"
	p := checkDoc("..", bad, lib)
	want := []string{"silo/nope.go", "declares no nope", "declares no WithNope", "has no method or field Nope",
		"has no method or field nope", "type Config has no method or field Nope", "w.nope()"}
	if len(p) != len(want) {
		t.Fatalf("found %d problems, want %d: %q", len(p), len(want), p)
	}
	for _, w := range want {
		found := false
		for _, q := range p {
			found = found || strings.Contains(q, w)
		}
		if !found {
			t.Errorf("no problem names %q: %q", w, p)
		}
	}
}
