package api

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// EncodeManifest writes deployments, daemons and services as a manifest, in
// the order given, in the same style as the documented examples: key/value
// pairs first, maps as inline tables, then [x.sub] tables, then [[x.list]]
// tables; empty fields are left out. DecodeManifest reads the result back to
// the same objects (status and server-set metadata are not written). Nodes
// and pods cannot be written; strings that are not valid UTF-8 are an error.
func EncodeManifest(objs []Object) ([]byte, error) {
	e := &manifestEncoder{}
	for i, o := range objs {
		table, m, err := toManifest(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			e.b.WriteString("\n")
		}
		e.b.WriteString("[[" + table + "]]\n")
		e.table(table, reflect.ValueOf(m).Elem())
		if e.err != nil {
			return nil, fmt.Errorf("api: writing %s %q: %w", table, o.GetMeta().Name, e.err)
		}
	}
	return []byte(e.b.String()), nil
}

type manifestEncoder struct {
	b   strings.Builder
	err error
}

// fieldInfo reads a manifest struct field's tag.
func fieldInfo(f reflect.StructField) (name string, always bool) {
	name, opts, _ := strings.Cut(f.Tag.Get("toml"), ",")
	return name, opts == "always"
}

// isSubTable reports whether a field is written as [header.name].
func isSubTable(t reflect.Type) bool {
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct
}

// isTableArray reports whether a field is written as [[header.name]].
func isTableArray(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct
}

// table writes the fields of struct rv, whose header has been written.
func (e *manifestEncoder) table(header string, rv reflect.Value) {
	t := rv.Type()
	for i := range t.NumField() {
		name, always := fieldInfo(t.Field(i))
		fv := rv.Field(i)
		if isSubTable(fv.Type()) || isTableArray(fv.Type()) || (!always && isEmptyValue(fv)) {
			continue
		}
		e.b.WriteString(quoteKey(name) + " = ")
		e.value(fv, true)
		e.b.WriteString("\n")
	}
	for i := range t.NumField() {
		name, _ := fieldInfo(t.Field(i))
		fv := rv.Field(i)
		if !isSubTable(fv.Type()) || fv.IsNil() {
			continue
		}
		h := header + "." + quoteKey(name)
		e.b.WriteString("[" + h + "]\n")
		e.table(h, fv.Elem())
	}
	for i := range t.NumField() {
		name, _ := fieldInfo(t.Field(i))
		fv := rv.Field(i)
		if !isTableArray(fv.Type()) {
			continue
		}
		h := header + "." + quoteKey(name)
		for j := range fv.Len() {
			e.b.WriteString("[[" + h + "]]\n")
			e.table(h, fv.Index(j))
		}
	}
}

func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Map:
		return v.Len() == 0
	case reflect.Pointer:
		return v.IsNil()
	case reflect.Int:
		return v.Int() == 0
	case reflect.Bool:
		return !v.Bool()
	}
	return false
}

// value writes a value; multiline allows a multi-line string.
func (e *manifestEncoder) value(v reflect.Value, multiline bool) {
	switch v.Kind() {
	case reflect.Pointer:
		e.value(v.Elem(), multiline)
	case reflect.Int:
		e.b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.String:
		s := v.String()
		e.checkUTF8(s)
		if multiline && strings.Contains(s, "\n") {
			e.b.WriteString(quoteMultiline(s))
		} else {
			e.b.WriteString(quoteString(s))
		}
	case reflect.Slice:
		e.b.WriteString("[")
		for i := range v.Len() {
			if i > 0 {
				e.b.WriteString(", ")
			}
			e.value(v.Index(i), false)
		}
		e.b.WriteString("]")
	case reflect.Map:
		m := v.Interface().(map[string]string)
		e.b.WriteString("{ ")
		for i, k := range slices.Sorted(maps.Keys(m)) {
			if i > 0 {
				e.b.WriteString(", ")
			}
			e.checkUTF8(k)
			e.checkUTF8(m[k])
			e.b.WriteString(quoteKey(k) + " = " + quoteString(m[k]))
		}
		e.b.WriteString(" }")
	case reflect.Bool:
		e.b.WriteString(strconv.FormatBool(v.Bool()))
	default:
		panic("api: manifest struct with unsupported field type " + v.Type().String())
	}
}

func (e *manifestEncoder) checkUTF8(s string) {
	if e.err == nil && !utf8.ValidString(s) {
		e.err = fmt.Errorf("%q is not valid UTF-8", s)
	}
}

// quoteString writes s as a TOML basic string.
func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	writeEscaped(&b, s, false)
	b.WriteByte('"')
	return b.String()
}

// quoteMultiline writes s as a TOML multi-line basic string, keeping its
// newlines as line breaks.
func quoteMultiline(s string) string {
	var b strings.Builder
	b.WriteString("\"\"\"\n") // a newline right after """ is not part of the string
	writeEscaped(&b, s, true)
	b.WriteString("\"\"\"")
	return b.String()
}

// writeEscaped escapes s for a basic string; keepNewlines writes '\n' as a
// line break (multi-line strings) rather than as \n.
func writeEscaped(b *strings.Builder, s string, keepNewlines bool) {
	for i, r := range s {
		switch r {
		case '"':
			// In a multi-line string a lone quote needs no escape; one
			// followed by another quote, or closing the string, does.
			if keepNewlines && i+1 < len(s) && s[i+1] != '"' {
				b.WriteByte('"')
			} else {
				b.WriteString(`\"`)
			}
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			if keepNewlines {
				b.WriteByte('\n')
			} else {
				b.WriteString(`\n`)
			}
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
}
