package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// Output formats of the client commands (-o). Tables are for people; JSON
// is for scripts: the API's shapes, encoded from the client's typed
// results, so its keys come in one stable order (the struct's field order;
// maps, such as a route's headers, sorted by key).
const (
	outputTable = "table"
	outputJSON  = "json"
)

// printer renders a command's result in the format -o chose.
type printer struct {
	w      io.Writer
	format string
}

// json prints v as indented JSON.
func (p printer) json(v any) error { return printJSON(p.w, v) }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows under a header, aligned.
func (p printer) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(p.w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// tabler is a result that prints as a table.
type tabler interface {
	rows() (header []string, rows [][]string)
}

// object prints one result: JSON as it is, or a table: its own (tabler),
// else a FIELD/VALUE table of its set fields (fieldsOf).
func (p printer) object(v any) error {
	if p.format == outputJSON {
		return p.json(v)
	}
	if t, ok := v.(tabler); ok {
		return p.table(t.rows())
	}
	return p.fields(fieldsOf(v))
}

// fields prints name/value pairs, one a line, the values aligned.
func (p printer) fields(kv [][2]string) error {
	tw := tabwriter.NewWriter(p.w, 2, 4, 2, ' ', 0)
	for _, f := range kv {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
	}
	return tw.Flush()
}

// fieldsOf lists the set fields of a struct (or pointer to one) by their
// JSON names, in field order: strings as they are, times in milliseconds
// (fields named *_at and trigger_time) as RFC 3339 UTC, anything else as
// compact JSON. A value that is not a struct is one field, "value".
func fieldsOf(v any) [][2]string {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return [][2]string{{"value", jsonText(v)}}
	}
	var out [][2]string
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		sf := rt.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fv := rv.Field(i)
		if strings.Contains(opts, "omitempty") && fv.IsZero() {
			continue
		}
		out = append(out, [2]string{name, valueText(name, fv)})
	}
	return out
}

func valueText(name string, fv reflect.Value) string {
	switch fv.Kind() {
	case reflect.String:
		return orDash(fv.String())
	case reflect.Int, reflect.Int64:
		if isTimeField(name) {
			return msTime(fv.Int())
		}
		return strconv.FormatInt(fv.Int(), 10)
	case reflect.Slice:
		if fv.Type().Elem().Kind() == reflect.String {
			return orDash(strings.Join(fv.Interface().([]string), ","))
		}
	}
	return jsonText(fv.Interface())
}

func isTimeField(name string) bool {
	return strings.HasSuffix(name, "_at") || name == "trigger_time"
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// msTime renders Unix milliseconds as RFC 3339 UTC with milliseconds.
func msTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printer is the printer for -o of the command.
func (c *clientFlags) printer(cmd *cobra.Command) printer {
	return printer{w: cmd.OutOrStdout(), format: c.output}
}

// deleted is what a delete prints.
type deleted struct {
	Deleted    string `json:"deleted"` // job, collection, route, node
	Collection string `json:"collection,omitempty"`
	ID         string `json:"id"`
}

// done prints the result of a command whose answer has no body.
func (p printer) done(d deleted) error {
	if p.format == outputJSON {
		return p.json(d)
	}
	name := d.ID
	if d.Collection != "" {
		name = d.Collection + "/" + d.ID
	}
	verb := "deleted"
	if d.Deleted == "node" {
		verb = "removed"
	}
	_, err := fmt.Fprintf(p.w, "%s %s %s\n", verb, d.Deleted, name)
	return err
}
