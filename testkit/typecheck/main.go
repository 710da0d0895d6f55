// Command typecheck type-checks packages and every package they import, the
// standard library included, from source as the Go compiler would compile
// them for another platform, without compiling them: make cross runs it
// for linux/arm64, which the release archives are built for.
//
//	go run ./testkit/typecheck -os linux -arch arm64 ./cmd/edgeagent ./cmd/edgecoord
//
// go list (under GOOS, GOARCH and CGO_ENABLED=0) picks each package's files
// by their build constraints; go/types checks them in dependency order.
// It reports what the compiler's front end would: a file missing for the
// platform, a name another platform's file declares, any type error. It
// does not compile or link, so it misses what only those steps see: a
// function declared without a body whose assembly is missing for the
// architecture, a bad //go:linkname. make dist builds the archives
// themselves.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "typecheck:", err)
		os.Exit(1)
	}
}

// listed is what typecheck reads of go list -json.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	ImportMap  map[string]string
	Error      *struct{ Err string }
}

// run type-checks the packages args name (after the flags) and their
// dependencies, printing one line per problem to out; the error says
// how many there were.
func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("typecheck", flag.ContinueOnError)
	goos := fs.String("os", runtime.GOOS, "the platform's GOOS")
	goarch := fs.String("arch", runtime.GOARCH, "the platform's GOARCH")
	dir := fs.String("C", ".", "the directory go list runs in")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("no packages named (usage: typecheck [-os GOOS] [-arch GOARCH] [-C dir] packages...)")
	}
	sizes := types.SizesFor("gc", *goarch)
	if sizes == nil {
		return fmt.Errorf("-arch %s: not an architecture the gc compiler knows", *goarch)
	}
	pkgs, err := list(*dir, *goos, *goarch, fs.Args())
	if err != nil {
		return err
	}
	problems := 0
	report := func(format string, a ...any) {
		problems++
		fmt.Fprintf(out, format+"\n", a...)
	}
	checked := map[string]*types.Package{"unsafe": types.Unsafe}
	fset := token.NewFileSet()
	for _, p := range pkgs {
		if p.ImportPath == "unsafe" {
			continue
		}
		if p.Error != nil {
			report("%s: %s", p.ImportPath, strings.TrimSpace(p.Error.Err))
			continue
		}
		if len(p.CgoFiles) > 0 {
			report("%s: has cgo files with CGO_ENABLED=0: %s", p.ImportPath, strings.Join(p.CgoFiles, " "))
			continue
		}
		files := make([]*ast.File, 0, len(p.GoFiles))
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				report("%v", err)
				continue
			}
			files = append(files, f)
		}
		conf := types.Config{
			Sizes: sizes,
			Importer: importerFunc(func(path string) (*types.Package, error) {
				if mapped, ok := p.ImportMap[path]; ok {
					path = mapped
				}
				if tp, ok := checked[path]; ok && tp != nil {
					return tp, nil
				}
				return nil, fmt.Errorf("%s is not type-checked (it failed, or go list did not list it)", path)
			}),
			Error: func(err error) { report("%v", err) },
		}
		tp, _ := conf.Check(p.ImportPath, fset, files, nil)
		checked[p.ImportPath] = tp
	}
	if problems > 0 {
		return fmt.Errorf("%d problems for %s/%s in %d packages", problems, *goos, *goarch, len(pkgs))
	}
	fmt.Fprintf(out, "typecheck: %d packages for %s/%s, no problem\n", len(pkgs), *goos, *goarch)
	return nil
}

// list runs go list -deps -json for goos/goarch without cgo: the packages
// in dependency order, each after every package it imports.
func list(dir, goos, goarch string, patterns []string) ([]listed, error) {
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append([]string{"list", "-e", "-deps", "-json=ImportPath,Dir,GoFiles,CgoFiles,ImportMap,Error", "--"}, patterns...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list for %s/%s: %v: %s", goos, goarch, err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(outb))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list for %s/%s: %v", goos, goarch, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
