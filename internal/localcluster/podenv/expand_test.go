package podenv

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestExpand(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"VAR_A":     "A",
		"VAR_B":     "B",
		"VAR_EMPTY": "",
		"VAR_REF":   "$(VAR_A)",
		"A$(B":      "odd",
	}
	tests := []struct {
		name, in, want string
	}{
		{"no reference", "plain text", "plain text"},
		{"empty", "", ""},
		{"one reference", "$(VAR_A)", "A"},
		{"reference inside text", "___$(VAR_A)___", "___A___"},
		{"two references", "$(VAR_A)-$(VAR_B)", "A-B"},
		{"adjacent references", "$(VAR_A)$(VAR_B)", "AB"},
		{"empty value", "x$(VAR_EMPTY)y", "xy"},
		{"value not expanded again", "$(VAR_REF)", "$(VAR_A)"},
		{"unknown kept as written", "$(UNKNOWN)", "$(UNKNOWN)"},
		{"unknown among known", "$(VAR_A)$(UNKNOWN)$(VAR_B)", "A$(UNKNOWN)B"},
		{"empty name kept", "$()", "$()"},
		{"escaped operator", "$$", "$"},
		{"escaped reference", "$$(VAR_A)", "$(VAR_A)"},
		{"escaped then reference", "$$$(VAR_A)", "$A"},
		{"double escape", "$$$$(VAR_A)", "$$(VAR_A)"},
		{"lone operator at end", "abc$", "abc$"},
		{"lone operator alone", "$", "$"},
		{"operator before a letter", "$VAR_A", "$VAR_A"},
		{"operator before a multibyte rune", "$é$(VAR_A)", "$éA"},
		{"operator then escape", "$x$$", "$x$"},
		{"unclosed reference", "$(VAR_A", "$(VAR_A"},
		{"unclosed then closed", "$(VAR_A $(VAR_B)", "$(VAR_A $(VAR_B)"},
		{"name runs to the first paren", "$(A$(B)", "odd"},
		{"unclosed at end", "x$(", "x$("},
		{"closing paren alone", "VAR_A)", "VAR_A)"},
		{"nested parens", "$((VAR_A))", "$((VAR_A))"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Expand(tt.in, env); got != tt.want {
				t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestExpandNilEnv(t *testing.T) {
	t.Parallel()
	if got := Expand("$(A) $$ $(B", nil); got != "$(A) $ $(B" {
		t.Errorf("Expand with nil env = %q", got)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NAME": "etcd-0", "DIR": "/var/lib/etcd"}
	tests := []struct {
		name                  string
		container             corev1.Container
		wantCommand, wantArgs []string
	}{
		{"neither", corev1.Container{}, nil, nil},
		{"command only", corev1.Container{Command: []string{"etcd", "--name=$(NAME)"}}, []string{"etcd", "--name=etcd-0"}, nil},
		{"args only", corev1.Container{Args: []string{"--data-dir", "$(DIR)"}}, nil, []string{"--data-dir", "/var/lib/etcd"}},
		{
			"both, with escape and unknown",
			corev1.Container{Command: []string{"/bin/sh", "-c"}, Args: []string{"echo $$(NAME) $(NAME) $(NOPE)"}},
			[]string{"/bin/sh", "-c"}, []string{"echo $(NAME) etcd-0 $(NOPE)"},
		},
		{"empty lists are nil", corev1.Container{Command: []string{}, Args: []string{}}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			command, args := CommandLine(&tt.container, env)
			if !reflect.DeepEqual(command, tt.wantCommand) || !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("CommandLine() = %q, %q; want %q, %q", command, args, tt.wantCommand, tt.wantArgs)
			}
		})
	}
}

func TestCommandLineDoesNotChangeContainer(t *testing.T) {
	t.Parallel()
	c := &corev1.Container{Command: []string{"$(A)"}, Args: []string{"$(A)"}}
	CommandLine(c, map[string]string{"A": "a"})
	if c.Command[0] != "$(A)" || c.Args[0] != "$(A)" {
		t.Errorf("container changed: %q %q", c.Command, c.Args)
	}
}

func TestMap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		want map[string]string
	}{
		{"empty", nil, map[string]string{}},
		{"values", []string{"A=1", "B="}, map[string]string{"A": "1", "B": ""}},
		{"value with =", []string{"A=x=y"}, map[string]string{"A": "x=y"}},
		{"no =", []string{"A"}, map[string]string{"A": ""}},
		{"later wins", []string{"A=1", "A=2"}, map[string]string{"A": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Map(tt.env); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Map(%q) = %v, want %v", tt.env, got, tt.want)
			}
		})
	}
}
