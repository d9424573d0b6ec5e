package kubectletcd

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// none stands for what the status does not (yet) tell.
const none = "-"

// minMessageWidth is the narrowest a condition message column may be
// beside the other columns; below it messages go on lines of their own.
const minMessageWidth = 40

// renderStatus writes the one-screen view of a cluster. width is the
// terminal width, 0 for unlimited.
func renderStatus(w io.Writer, v StatusView, width int, now time.Time) error {
	p := &printer{w: w}
	p.linef("EtcdCluster %s/%s", v.Namespace, v.Name)
	field := func(name, value string) { p.wrapped(fmt.Sprintf("  %-12s", name+":"), 14, value, width) }
	field("Version", orNone(v.Version))
	field("Cluster ID", orNone(v.ClusterID))
	field("Endpoints", orNone(strings.Join(v.Endpoints, ", ")))
	if v.CASecretName != "" {
		field("CA Secret", v.CASecretName)
	}
	field("Replicas", fmt.Sprintf("%d desired, %d members, %d ready, %d updated", v.DesiredReplicas, v.Replicas, v.ReadyReplicas, v.UpdatedReplicas))
	if v.Paused {
		field("Paused", fmt.Sprintf("yes: the operator changes nothing until kubectl etcd resume %s", v.Name))
	} else {
		field("Paused", "no")
	}
	switch {
	case v.ObservedGeneration == 0:
		field("Generation", fmt.Sprintf("%d, no spec settled yet: the operator writes observedGeneration once the cluster has formed", v.Generation))
	case v.ObservedGeneration != v.Generation:
		field("Generation", fmt.Sprintf("%d, status is of %d: the operator has not caught up with the latest spec", v.Generation, v.ObservedGeneration))
	}

	p.linef("")
	p.linef("Conditions:")
	if len(v.Conditions) == 0 {
		p.linef("  none yet (is the operator running?)")
	} else {
		renderConditions(p, v.Conditions, width, now)
	}

	p.linef("")
	if v.Live {
		p.linef("Members (read from etcd now):")
	} else {
		p.linef("Members:")
	}
	if len(v.Members) == 0 {
		p.linef("  none yet")
		notes(p, v, width, now)
		return p.err
	}
	renderMemberTable(p, v, width, now)
	return p.err
}

// renderMembers writes the members table alone.
func renderMembers(w io.Writer, v StatusView, width int, now time.Time) error {
	p := &printer{w: w}
	renderMemberTable(p, v, width, now)
	return p.err
}

func renderConditions(p *printer, conds []metav1.Condition, width int, now time.Time) {
	const indent = "  "
	cols := []column{{header: "TYPE"}, {header: "STATUS"}, {header: "REASON"}, {header: "AGE"}}
	rows := make([][]string, len(conds))
	for i, c := range conds {
		age := none
		if !c.LastTransitionTime.IsZero() {
			age = duration.HumanDuration(now.Sub(c.LastTransitionTime.Time))
		}
		rows[i] = []string{c.Type, string(c.Status), orNone(c.Reason), age}
	}
	widths := columnWidths(cols, rows)
	lead := len(indent)
	for _, w := range widths {
		lead += w + len(gap)
	}
	// The message follows on the row while there is room for it, and
	// goes on lines of its own, indented, on a narrow terminal.
	beside := width == 0 || width-lead >= minMessageWidth
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = c.header
	}
	if beside {
		p.linef("%s%s%sMESSAGE", indent, padRow(header, widths), gap)
	} else {
		p.linef("%s%s", indent, strings.TrimRight(padRow(header, widths), " "))
	}
	for i, c := range conds {
		row := padRow(rows[i], widths)
		if c.Message == "" {
			p.linef("%s%s", indent, strings.TrimRight(row, " "))
			continue
		}
		if beside {
			lines := wrap(c.Message, width-lead)
			p.linef("%s%s%s%s", indent, row, gap, lines[0])
			for _, l := range lines[1:] {
				p.linef("%s%s", strings.Repeat(" ", lead), l)
			}
			continue
		}
		p.linef("%s%s", indent, strings.TrimRight(row, " "))
		const msgIndent = "      "
		for _, l := range wrap(c.Message, width-len(msgIndent)) {
			p.linef("%s%s", msgIndent, l)
		}
	}
}

// memberColumns are the columns of the members table. drop orders the
// columns a narrow terminal leaves out, 1 first; 0 is never left out.
var memberColumns = []column{
	{header: "NAME"},
	{header: "ID", drop: 1},
	{header: "ROLE"},
	{header: "HEALTHY"},
	{header: "DB SIZE"},
	{header: "IN USE", drop: 5},
	{header: "RAFT INDEX", drop: 3},
	{header: "POD", drop: 6},
	{header: "NODE", drop: 2},
	{header: "RESTARTS", drop: 4},
}

func renderMemberTable(p *printer, v StatusView, width int, now time.Time) {
	const indent = "  "
	rows := make([][]string, len(v.Members))
	for i, m := range v.Members {
		healthy := none
		if m.Healthy != nil {
			healthy = yesNo(*m.Healthy)
		}
		restarts := none
		if m.Restarts != nil {
			restarts = strconv.Itoa(int(*m.Restarts))
		}
		raftIndex := none
		if m.RaftIndex != 0 {
			raftIndex = strconv.FormatUint(m.RaftIndex, 10)
		}
		rows[i] = []string{
			m.Name, orNone(m.ID), orNone(m.Role), healthy,
			bytesOrNone(m.DBSize), bytesOrNone(m.DBSizeInUse), raftIndex,
			orNone(m.Pod), orNone(m.Node), restarts,
		}
	}
	avail := 0
	if width > 0 {
		avail = width - len(indent)
	}
	cols, rows, hidden := fit(memberColumns, rows, avail)
	widths := columnWidths(cols, rows)
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = c.header
	}
	p.linef("%s%s", indent, strings.TrimRight(padRow(header, widths), " "))
	for _, r := range rows {
		p.linef("%s%s", indent, strings.TrimRight(padRow(r, widths), " "))
	}
	if len(hidden) > 0 {
		p.wrapped("  ", 3, fmt.Sprintf("(left out to fit the terminal: %s; -o wide shows every column)", strings.Join(hidden, ", ")), width)
	}
	notes(p, v, width, now)
}

// notes are what the table cannot hold: why a member is unhealthy, its
// alarms, Pods that are not members, and why Pods are not shown.
func notes(p *printer, v StatusView, width int, now time.Time) {
	var lines []string
	for _, m := range v.Members {
		if m.Healthy != nil && !*m.Healthy {
			when := ""
			if m.LastProbeTime != nil {
				when = fmt.Sprintf(" (probed %s ago)", duration.HumanDuration(now.Sub(m.LastProbeTime.Time)))
			}
			reason := m.LastError
			if reason == "" {
				reason = "no reason recorded"
			}
			lines = append(lines, fmt.Sprintf("%s is unhealthy%s: %s", m.Name, when, reason))
		}
		if len(m.Alarms) > 0 {
			lines = append(lines, fmt.Sprintf("%s raised alarm %s", m.Name, strings.Join(m.Alarms, ", ")))
		}
		if m.ID == "" && m.Pod != "" && m.Pod != podMissing {
			lines = append(lines, fmt.Sprintf("%s has a Pod but no entry in the member list yet (being added or removed)", m.Name))
		}
	}
	if v.PodsUnavailable != "" {
		lines = append(lines, "Pod, node and restarts are not shown: "+v.PodsUnavailable)
	}
	if len(lines) == 0 {
		return
	}
	p.linef("")
	for _, l := range lines {
		p.wrapped("  ", 4, l, width)
	}
}

type column struct {
	header string
	drop   int
}

const gap = "  "

// fit leaves out columns, in their drop order, until the table fits in
// width (0: no limit). It returns the columns and rows left and the
// headers of the columns left out.
func fit(cols []column, rows [][]string, width int) ([]column, [][]string, []string) {
	var hidden []string
	for width > 0 && tableWidth(columnWidths(cols, rows)) > width {
		drop := -1
		for i, c := range cols {
			if c.drop > 0 && (drop < 0 || c.drop < cols[drop].drop) {
				drop = i
			}
		}
		if drop < 0 {
			break
		}
		hidden = append(hidden, cols[drop].header)
		cols = append(cols[:drop:drop], cols[drop+1:]...)
		next := make([][]string, len(rows))
		for i, r := range rows {
			next[i] = append(r[:drop:drop], r[drop+1:]...)
		}
		rows = next
	}
	return cols, rows, hidden
}

func columnWidths(cols []column, rows [][]string) []int {
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = utf8.RuneCountInString(c.header)
		for _, r := range rows {
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	return widths
}

func tableWidth(widths []int) int {
	total := 0
	for _, w := range widths {
		total += w
	}
	return total + len(gap)*(len(widths)-1)
}

func padRow(cells []string, widths []int) string {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteString(gap)
		}
		b.WriteString(c)
		b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
	}
	return b.String()
}

// wrap breaks text into lines of at most width runes at spaces; a word
// longer than width gets a line of its own. width 0 or less: one line.
func wrap(text string, width int) []string {
	words := strings.Fields(text)
	if width <= 0 || len(words) == 0 {
		return []string{text}
	}
	var lines []string
	line := words[0]
	for _, word := range words[1:] {
		if utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width {
			lines = append(lines, line)
			line = word
			continue
		}
		line += " " + word
	}
	return append(lines, line)
}

// humanBytes writes a size as etcdctl does: decimal units, one decimal
// below 10.
func humanBytes(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"kB", "MB", "GB", "TB", "PB", "EB"}
	f := float64(n)
	for _, u := range units {
		f /= 1000
		if f < 1000 || u == units[len(units)-1] {
			if f < 10 {
				return fmt.Sprintf("%.1f %s", f, u)
			}
			return fmt.Sprintf("%.0f %s", f, u)
		}
	}
	return ""
}

func bytesOrNone(n int64) string {
	if n == 0 {
		return none
	}
	return humanBytes(n)
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// printer writes lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

// wrapped writes text after lead, wrapped to width (0: no limit), its
// further lines indented by hang.
func (p *printer) wrapped(lead string, hang int, text string, width int) {
	lines := wrap(text, width-max(len(lead), hang))
	p.linef("%s%s", lead, lines[0])
	for _, l := range lines[1:] {
		p.linef("%s%s", strings.Repeat(" ", hang), l)
	}
}

func (p *printer) linef(format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
}
