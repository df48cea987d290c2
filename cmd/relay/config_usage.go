package main

import (
	"io"
	"reflect"
	"text/tabwriter"
	"text/template"

	"github.com/kelseyhightower/envconfig"
)

// usageTable is envconfig's table with the accepted range of each numeric or duration
// variable ("-" for the others) before the description.
const usageTable = `
KEY	TYPE	DEFAULT	RANGE	DESCRIPTION
{{range .}}{{usage_key .}}	{{usage_type .}}	{{usage_default .}}	{{usage_range .}}	{{usage_description .}}
{{end}}`

// writeUsage prints every variable of Config with its type, default, range and description.
func writeUsage(w io.Writer) error {
	// envconfig hands the template its own unexported type; its fields are read by name.
	field := func(v any, name string) reflect.Value { return reflect.ValueOf(v).FieldByName(name) }
	tag := func(v any, key string) string {
		return field(v, "Tags").Interface().(reflect.StructTag).Get(key)
	}
	tmpl, err := template.New("usage").Funcs(template.FuncMap{
		"usage_key":         func(v any) string { return field(v, "Key").String() },
		"usage_description": func(v any) string { return tag(v, "desc") },
		"usage_default":     func(v any) string { return tag(v, "default") },
		"usage_type": func(v any) string {
			t := field(v, "Field").Interface().(reflect.Value).Type()
			if t.Kind() == reflect.String && t.Name() == "string" {
				return "String"
			}
			return t.Name()
		},
		"usage_range": func(v any) string {
			if r, ok := configRanges[field(v, "Key").String()]; ok {
				return r.String()
			}
			return "-"
		},
	}).Parse(usageTable)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 1, 0, 2, ' ', 0)
	var cfg Config
	if err := envconfig.Usaget("", &cfg, tw, tmpl); err != nil {
		return err
	}
	return tw.Flush()
}
