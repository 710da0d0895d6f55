package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// maxDepth bounds the nesting of aliases and merge keys the decoder follows.
const maxDepth = 32

// position is a 1-based line and column in a config file.
type position struct{ line, col int }

// decoder decodes one YAML document into a configuration struct. It checks
// the document against the struct's yaml tags as it goes and collects every
// problem instead of stopping at the first, so that one run reports an
// unknown key, a mistyped value and a malformed duration together.
//
// The document is parsed by goccy/go-yaml; the decoder walks its AST, which
// carries the line and column of every key and value.
type decoder struct {
	file   string
	lookup func(string) (string, bool)

	anchors  map[string]ast.Node
	problems Problems
	// failed holds the paths whose value could not be decoded; Validate's
	// findings at or beneath them are consequences, not separate problems.
	failed []string
	// pos is the position of each decoded path, used to place Validate's
	// findings in the file.
	pos map[string]position
	// literalSecret is set when a secret is written in the file itself
	// rather than taken from the environment.
	literalSecret bool
	depth         int
}

func newDecoder(file string, lookup func(string) (string, bool)) *decoder {
	return &decoder{file: file, lookup: lookup, anchors: map[string]ast.Node{}, pos: map[string]position{}}
}

// decode parses data and decodes its document into dst, a pointer to a
// struct holding the defaults.
func (d *decoder) decode(data []byte, dst any) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		d.syntaxError(err)
		return
	}
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			d.fail("", doc.Body, "a config file holds one YAML document; found another")
			return
		}
		body = doc.Body
	}
	if body == nil {
		return // an empty file: the defaults stand
	}
	ast.Walk(anchorCollector(d.anchors), body)
	d.value(body, reflect.ValueOf(dst).Elem(), "")
}

// syntaxError records a parse error with its position. Only the message is
// kept; goccy's formatted error quotes the source, which may hold secrets.
func (d *decoder) syntaxError(err error) {
	var ye yaml.Error
	if errors.As(err, &ye) {
		p := Problem{File: d.file, Msg: "invalid YAML: " + ye.GetMessage()}
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			p.Line, p.Col = tk.Position.Line, tk.Position.Column
		}
		d.problems = append(d.problems, p)
		d.failed = append(d.failed, "")
		return
	}
	d.problems = append(d.problems, Problem{File: d.file, Msg: "invalid YAML"})
	d.failed = append(d.failed, "")
}

// fail records a problem with the value at path, placed at node.
func (d *decoder) fail(path string, node ast.Node, format string, args ...any) {
	p := posOf(node)
	d.problems = append(d.problems, Problem{File: d.file, Line: p.line, Col: p.col, Path: path, Msg: fmt.Sprintf(format, args...)})
	d.failed = append(d.failed, path)
}

var (
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	secretType          = reflect.TypeFor[Secret]()
	durationType        = reflect.TypeFor[Duration]()
	byteSizeType        = reflect.TypeFor[ByteSize]()
)

// value decodes node into v, the field at path.
func (d *decoder) value(node ast.Node, v reflect.Value, path string) {
	if d.depth > maxDepth {
		d.fail(path, node, "aliases or merge keys nested too deeply")
		return
	}
	d.depth++
	defer func() { d.depth-- }()

	written := node
	node = d.resolve(node)
	if node == nil {
		d.fail(path, written, "alias refers to an unknown anchor")
		return
	}
	if _, ok := node.(*ast.NullNode); ok {
		return // an empty value leaves the default in place
	}
	if _, isScalar := node.(ast.ScalarNode); isScalar {
		d.pos[path] = posOf(written)
	}

	if reflect.PointerTo(v.Type()).Implements(textUnmarshalerType) {
		text, ok := scalarText(node)
		if !ok {
			d.fail(path, written, "expected %s, got %s", expected(v.Type()), kindOf(node))
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(text)); err != nil {
			d.fail(path, written, "%v", err)
		}
		return
	}

	switch v.Kind() {
	case reflect.Struct:
		d.mapping(node, written, v, path)
	case reflect.Slice:
		d.sequence(node, written, v, path)
	case reflect.Map:
		d.dict(node, written, v, path)
	case reflect.String:
		d.string(node, written, v, path)
	case reflect.Bool:
		b, ok := node.(*ast.BoolNode)
		if !ok {
			d.fail(path, written, "expected true or false, got %s", describe(node))
			return
		}
		v.SetBool(b.Value)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := node.(*ast.IntegerNode)
		if !ok {
			if isOutOfRange(node) {
				d.fail(path, written, "integer %s out of range", node.GetToken().Value)
				return
			}
			d.fail(path, written, "expected an integer, got %s", describe(node))
			return
		}
		var i int64
		switch x := n.Value.(type) {
		case int64:
			i = x
		case uint64:
			if x > 1<<63-1 {
				d.fail(path, written, "integer %s out of range", n.Token.Value)
				return
			}
			i = int64(x)
		default:
			d.fail(path, written, "integer %s out of range", n.Token.Value)
			return
		}
		if v.OverflowInt(i) {
			d.fail(path, written, "integer %s out of range", n.Token.Value)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		switch n := node.(type) {
		case *ast.FloatNode:
			v.SetFloat(n.Value)
		case *ast.IntegerNode:
			switch x := n.Value.(type) {
			case int64:
				v.SetFloat(float64(x))
			case uint64:
				v.SetFloat(float64(x))
			}
		default:
			d.fail(path, written, "expected a number, got %s", describe(node))
		}
	default:
		panic(fmt.Sprintf("config: field %s has unsupported type %s", path, v.Type()))
	}
}

// string decodes a scalar into a string field, expanding ${NAME} references.
func (d *decoder) string(node, written ast.Node, v reflect.Value, path string) {
	raw, ok := scalarText(node)
	if !ok {
		d.fail(path, written, "expected a string, got %s", kindOf(node))
		return
	}
	out, missing, err := expandEnv(raw, d.lookup)
	if err != nil {
		d.fail(path, written, "%v", err)
		return
	}
	for _, name := range missing {
		d.fail(path, written, "environment variable %s is not set", name)
	}
	if len(missing) > 0 {
		return
	}
	if v.Type() == secretType {
		if raw != "" && !hasEnvRef(raw) {
			d.literalSecret = true
		}
		if out == redacted {
			d.fail(path, written, "%v", errRedacted)
			return
		}
	}
	v.SetString(out)
}

// mapping decodes a mapping into the struct v, reporting keys that name no
// field.
func (d *decoder) mapping(node, written ast.Node, v reflect.Value, path string) {
	m, ok := node.(*ast.MappingNode)
	if !ok {
		d.fail(path, written, "expected a mapping, got %s", kindOf(node))
		return
	}
	fields := structFields(v.Type())
	for _, kv := range d.entries(m, path) {
		key := keyText(kv.Key)
		index, ok := fields[key]
		if !ok {
			p := posOf(kv.Key)
			msg := fmt.Sprintf("unknown field %q", key)
			if s := suggest(key, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.problems = append(d.problems, Problem{File: d.file, Line: p.line, Col: p.col, Path: path, Msg: msg})
			continue
		}
		child := joinPath(path, key)
		d.pos[child] = posOf(kv.Key)
		d.value(kv.Value, v.FieldByIndex(index), child)
	}
}

// entries returns the key/value pairs of m with merge keys (<<) expanded:
// merged pairs first, so that the mapping's own keys override them.
func (d *decoder) entries(m *ast.MappingNode, path string) []*ast.MappingValueNode {
	var merged, own []*ast.MappingValueNode
	for _, kv := range m.Values {
		if _, ok := kv.Key.(*ast.MergeKeyNode); !ok {
			own = append(own, kv)
			continue
		}
		if d.depth > maxDepth {
			d.fail(path, kv.Key, "aliases or merge keys nested too deeply")
			continue
		}
		d.depth++
		src := d.resolve(kv.Value)
		var sources []ast.Node
		if seq, ok := src.(*ast.SequenceNode); ok {
			// Earlier mappings in the list take precedence, so apply them last.
			for i := len(seq.Values) - 1; i >= 0; i-- {
				sources = append(sources, d.resolve(seq.Values[i]))
			}
		} else {
			sources = append(sources, src)
		}
		for _, s := range sources {
			sm, ok := s.(*ast.MappingNode)
			if !ok {
				d.fail(path, kv.Value, "merge key (<<) needs a mapping or a list of mappings")
				continue
			}
			merged = append(merged, d.entries(sm, path)...)
		}
		d.depth--
	}
	return append(merged, own...)
}

// sequence decodes a sequence into the slice v, replacing its contents.
func (d *decoder) sequence(node, written ast.Node, v reflect.Value, path string) {
	seq, ok := node.(*ast.SequenceNode)
	if !ok {
		d.fail(path, written, "expected a list, got %s", kindOf(node))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	for i, elem := range seq.Values {
		child := fmt.Sprintf("%s[%d]", path, i)
		d.pos[child] = posOf(elem)
		d.value(elem, out.Index(i), child)
	}
	v.Set(out)
}

// dict decodes a mapping into the map v (string keys), adding to its
// contents; each key's value is decoded over the element type's zero value,
// or over the value a merge key (<<) gave the same key.
func (d *decoder) dict(node, written ast.Node, v reflect.Value, path string) {
	if v.Type().Key().Kind() != reflect.String {
		panic(fmt.Sprintf("config: field %s has unsupported type %s", path, v.Type()))
	}
	m, ok := node.(*ast.MappingNode)
	if !ok {
		d.fail(path, written, "expected a mapping, got %s", kindOf(node))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, kv := range d.entries(m, path) {
		key := keyText(kv.Key)
		child := joinPath(path, key)
		d.pos[child] = posOf(kv.Key)
		elem := reflect.New(v.Type().Elem()).Elem()
		if prev := v.MapIndex(reflect.ValueOf(key).Convert(v.Type().Key())); prev.IsValid() {
			elem.Set(prev)
		}
		d.value(kv.Value, elem, child)
		v.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), elem)
	}
}

// resolve strips anchors and tags from node and follows aliases. It returns
// nil for an alias to an unknown anchor.
func (d *decoder) resolve(node ast.Node) ast.Node {
	for i := 0; i <= maxDepth; i++ {
		switch n := node.(type) {
		case *ast.AnchorNode:
			node = n.Value
		case *ast.TagNode:
			node = n.Value
		case *ast.AliasNode:
			target, ok := d.anchors[n.Value.GetToken().Value]
			if !ok {
				return nil
			}
			node = target
		default:
			return node
		}
	}
	return nil
}

// anchorCollector records every anchor in a document by name.
type anchorCollector map[string]ast.Node

func (a anchorCollector) Visit(node ast.Node) ast.Visitor {
	if n, ok := node.(*ast.AnchorNode); ok && n.Name != nil {
		a[n.Name.GetToken().Value] = n.Value
	}
	return a
}

// structFields maps the yaml names of t's fields to their indexes, descending
// into embedded structs tagged ",inline".
func structFields(t reflect.Type) map[string][]int {
	fields := map[string][]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.Anonymous && opts == "inline" && f.Type.Kind() == reflect.Struct {
			for k, idx := range structFields(f.Type) {
				fields[k] = append([]int{i}, idx...)
			}
			continue
		}
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		fields[name] = []int{i}
	}
	return fields
}

// scalarText returns the text of a scalar node as written, so that a secret
// such as 0123 stays "0123".
func scalarText(node ast.Node) (string, bool) {
	switch n := node.(type) {
	case *ast.StringNode:
		return n.Value, true
	case *ast.LiteralNode:
		return n.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, true
	}
	return "", false
}

func keyText(key ast.MapKeyNode) string {
	switch k := key.(type) {
	case *ast.StringNode:
		return k.Value
	case *ast.MappingKeyNode:
		if s, ok := k.Value.(*ast.StringNode); ok {
			return s.Value
		}
		if k.Value != nil {
			return k.Value.GetToken().Value
		}
	}
	return key.GetToken().Value
}

// isOutOfRange reports whether node is an unquoted integer too large for
// int64, which the parser leaves as a string.
func isOutOfRange(node ast.Node) bool {
	n, ok := node.(*ast.StringNode)
	if !ok || n.Token.Type != token.StringType {
		return false
	}
	_, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	return errors.Is(err, strconv.ErrRange)
}

// kindOf names the kind of a node for messages, without its value.
func kindOf(node ast.Node) string {
	switch node.(type) {
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	}
	return "a " + strings.ToLower(node.Type().String())
}

// describe names the kind of a node and quotes a scalar's text. It is used
// only for fields that are not strings, so the text is never a secret.
func describe(node ast.Node) string {
	if text, ok := scalarText(node); ok {
		return kindOf(node) + " " + strconv.Quote(text)
	}
	return kindOf(node)
}

// expected names what a field of type t accepts.
func expected(t reflect.Type) string {
	switch t {
	case durationType:
		return `a duration such as "2s"`
	case byteSizeType:
		return `a size such as "16MiB"`
	}
	return "a scalar value"
}

// posOf returns the position of node in the file, or the zero position.
func posOf(node ast.Node) position {
	if m, ok := node.(*ast.MappingNode); ok && len(m.Values) > 0 && !m.IsFlowStyle {
		node = m.Values[0].Key
	}
	if node == nil {
		return position{}
	}
	tk := node.GetToken()
	if tk == nil || tk.Position == nil {
		return position{}
	}
	return position{tk.Position.Line, tk.Position.Column}
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// suggest returns the field name closest to key, if one is close enough to
// be a likely typo.
func suggest(key string, fields map[string][]int) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	// Allow one edit per three characters, at least one and at most two.
	best, bestDist := "", min(max(len(key)/3, 1), 2)+1
	for _, name := range names {
		if dist := editDistance(strings.ToLower(key), name); dist < bestDist {
			best, bestDist = name, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
