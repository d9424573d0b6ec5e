package podenv

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Expand replaces the $(VAR) references in s with their values in env, as
// the kubelet expands env values, command and args:
//
//   - $(VAR) becomes the value of VAR; a VAR that env does not define is kept
//     as written, $(VAR) included;
//   - $$ becomes $, so $$(VAR) is the literal text $(VAR);
//   - a $( with no closing ) and a $ before any other character are kept as
//     written.
//
// The name of a reference is everything up to the first ')', so $(A$(B) names
// the variable "A$(B". These are the rules of Kubernetes'
// third_party/forked/golang/expansion, re-implemented here; one difference:
// an invalid UTF-8 byte after a lone $ is kept, where the kubelet writes
// U+FFFD.
func Expand(s string, env map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			// A lone $: kept, and the next byte is copied by the next turn.
			b.WriteByte('$')
		}
	}
	return b.String()
}

// CommandLine returns the container's command and args, each element expanded
// with env (the container's environment, see Map), as the kubelet does before
// it hands them to the runtime. The two are returned apart because an empty
// command means the image's entrypoint, which the args then follow; nil stays
// nil.
func CommandLine(c *corev1.Container, env map[string]string) (command, args []string) {
	return expandAll(c.Command, env), expandAll(c.Args, env)
}

// expandAll expands each element of list with env; nil for an empty list.
func expandAll(list []string, env map[string]string) []string {
	if len(list) == 0 {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = Expand(s, env)
	}
	return out
}

// Map turns an environment as Env returns it ("NAME=value" strings) into a
// map for Expand and CommandLine. A string without '=' is a name with an
// empty value; a later definition wins.
func Map(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		m[name] = value
	}
	return m
}
