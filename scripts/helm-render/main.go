// helm-render renders a Helm chart the way `helm template` does, for CI machines where helm itself cannot be
// installed: the same engine (Go text/template with Sprig 3 and Helm's own functions: include, tpl, required,
// toYaml, fromYaml, toJson, fromJson, lookup), the same values coalescing (-f files, then --set, over the chart's
// values.yaml) and the same output framing (`---` + `# Source:` per manifest, empty manifests dropped).
// What it does not do is listed in docs/kubernetes.md (subcharts, .Files, values.schema.json, hooks, --set arrays).
//
//	helm-render [-f values.yaml]... [--set a.b=c]... [--name release] [--namespace ns] CHART_DIR
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"sigs.k8s.io/yaml"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

type apiVersions []string

// Has is what templates call as .Capabilities.APIVersions.Has "policy/v1".
func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

var knownAPIs = apiVersions{"v1", "apps/v1", "autoscaling/v2", "policy/v1", "networking.k8s.io/v1", "node.k8s.io/v1",
	"rbac.authorization.k8s.io/v1", "batch/v1", "storage.k8s.io/v1"}

func main() {
	var files, sets multi
	name := flag.String("name", "release-name", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	flag.Var(&files, "f", "values file (repeatable)")
	flag.Var(&sets, "set", "key=value (repeatable; dotted keys)")
	flag.Parse()
	if flag.NArg() != 1 {
		fail(errors.New("usage: helm-render [-f values.yaml] [--set k=v] [--name n] [--namespace ns] CHART_DIR"))
	}
	out, err := render(flag.Arg(0), files, sets, *name, *namespace)
	if err != nil {
		fail(err)
	}
	os.Stdout.WriteString(out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "Error:", err)
	os.Exit(1)
}

func readYAML(path string) (map[string]interface{}, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// coalesce merges src over dst as Helm does: maps merge key by key, anything else replaces, null deletes.
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			dst[k] = coalesce(dm, sm)
		} else {
			dst[k] = v
		}
	}
	return dst
}

// parseSet turns a.b.c=v into a nested map, typing v as Helm's strvals does (int, bool, null, else string).
func parseSet(expr string) (map[string]interface{}, error) {
	eq := strings.Index(expr, "=")
	if eq <= 0 {
		return nil, fmt.Errorf("--set %q: expected key=value", expr)
	}
	var val interface{} = expr[eq+1:]
	switch s := expr[eq+1:]; {
	case s == "true" || s == "false":
		val = s == "true"
	case s == "null":
		val = nil
	default:
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			val = n
		}
	}
	keys := strings.Split(expr[:eq], ".")
	root := map[string]interface{}{}
	cur := root
	for i, k := range keys {
		if i == len(keys)-1 {
			cur[k] = val
		} else {
			next := map[string]interface{}{}
			cur[k] = next
			cur = next
		}
	}
	return root, nil
}

func values(chart string, files, sets []string) (map[string]interface{}, error) {
	vals, err := readYAML(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		m, err := readYAML(f)
		if err != nil {
			return nil, err
		}
		vals = coalesce(vals, m)
	}
	for _, s := range sets {
		m, err := parseSet(s)
		if err != nil {
			return nil, err
		}
		vals = coalesce(vals, m)
	}
	return vals, nil
}

func render(chart string, files, sets []string, name, namespace string) (string, error) {
	meta, err := readYAML(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	vals, err := values(chart, files, sets)
	if err != nil {
		return "", err
	}
	chartName, _ := meta["name"].(string)
	top := map[string]interface{}{
		"Values": vals,
		"Release": map[string]interface{}{"Name": name, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1},
		"Chart": map[string]interface{}{"Name": chartName, "Version": meta["version"], "AppVersion": meta["appVersion"],
			"Description": meta["description"], "Type": meta["type"]},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{"Version": "v1.34.0", "Major": "1", "Minor": "34", "GitVersion": "v1.34.0"},
			"APIVersions": knownAPIs,
		},
	}
	paths, err := filepath.Glob(filepath.Join(chart, "templates", "*"))
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	root := template.New("gotpl")
	funcs := funcMap(root)
	root.Funcs(funcs).Option("missingkey=zero")
	var names []string
	for _, p := range paths {
		base := filepath.Base(p)
		ext := filepath.Ext(base)
		if base == "NOTES.txt" || !(ext == ".yaml" || ext == ".yml" || ext == ".tpl") {
			continue
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		tname := chartName + "/templates/" + base
		if _, err := root.New(tname).Parse(string(raw)); err != nil {
			return "", err
		}
		if !strings.HasPrefix(base, "_") {
			names = append(names, tname)
		}
	}
	var out strings.Builder
	for _, tname := range names {
		var buf bytes.Buffer
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": tname, "BasePath": chartName + "/templates"}
		if err := root.ExecuteTemplate(&buf, tname, data); err != nil {
			return "", err
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		for _, doc := range splitDocs(text) {
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", tname, doc)
		}
	}
	return out.String(), nil
}

// splitDocs drops documents that hold only whitespace and comments, as Helm drops empty manifests.
func splitDocs(text string) []string {
	var docs []string
	for _, d := range strings.Split(text, "\n---") {
		d = strings.TrimPrefix(strings.TrimSpace(d), "---")
		meaningful := false
		for _, line := range strings.Split(d, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				meaningful = true
				break
			}
		}
		if meaningful {
			docs = append(docs, strings.TrimSpace(d))
		}
	}
	return docs
}

func funcMap(root *template.Template) template.FuncMap {
	f := sprig.TxtFuncMap()
	// Helm removes these: a chart must not read the renderer's environment.
	delete(f, "env")
	delete(f, "expandenv")
	f["toYaml"] = func(v interface{}) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(b), "\n")
	}
	f["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	f["toJson"] = func(v interface{}) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	f["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, errors.New(msg)
		}
		return v, nil
	}
	f["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	// helm template has no cluster to look objects up in: lookup answers an empty map, as there.
	f["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	return f
}
