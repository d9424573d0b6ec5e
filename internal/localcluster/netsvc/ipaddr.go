package netsvc

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// Messages of the ip command that mean the change was made already.
const (
	ipExists       = "File exists"                     // address or link already there
	ipNoSuchAddr   = "Cannot assign requested address" // address not on the link
	ipNoSuchDevice = "Cannot find device"              // link gone, and its addresses with it
)

// runFunc runs the ip command with args and returns its combined output.
type runFunc func(args ...string) (string, error)

// runIP runs the ip command.
func runIP(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// IPAddrManager is the AddressManager of a real host: it assigns each address
// as a /32 to Link with the ip command. It needs CAP_NET_ADMIN.
type IPAddrManager struct {
	// Link is the name of the link addresses go on, usually a dummy link made
	// by EnsureDummyLink.
	Link string

	run runFunc // nil means runIP; tests replace it
}

// Add runs `ip addr add IP/32 dev LINK`; an address already there is no error.
func (m IPAddrManager) Add(ip string) error {
	return m.addr("add", ip, ipExists)
}

// Remove runs `ip addr del IP/32 dev LINK`; an address or link already gone is no error.
func (m IPAddrManager) Remove(ip string) error {
	return m.addr("del", ip, ipNoSuchAddr, ipNoSuchDevice)
}

// addr runs `ip addr VERB IP/32 dev LINK`, ignoring failures whose output
// contains one of the done messages.
func (m IPAddrManager) addr(verb, ip string, done ...string) error {
	parsed := net.ParseIP(ip)
	if parsed == nil || parsed.To4() == nil {
		return fmt.Errorf("%q is not an IPv4 address", ip)
	}
	run := m.run
	if run == nil {
		run = runIP
	}
	out, err := run("addr", verb, parsed.String()+"/32", "dev", m.Link)
	return unlessDone(out, err, done...)
}

// EnsureDummyLink creates the dummy link name unless it exists, and sets it up.
// A link of that name that exists is used whatever its type.
func EnsureDummyLink(name string) error {
	return ensureDummyLink(runIP, name)
}

// ensureDummyLink is EnsureDummyLink with the ip command run by run.
func ensureDummyLink(run runFunc, name string) error {
	if name == "" {
		return fmt.Errorf("empty link name")
	}
	out, err := run("link", "add", name, "type", "dummy")
	if err := unlessDone(out, err, ipExists); err != nil {
		return err
	}
	_, err = run("link", "set", name, "up")
	return err
}

// unlessDone returns err, the error of a command whose output is out, unless
// out contains one of the messages saying the change was made already.
func unlessDone(out string, err error, messages ...string) error {
	for _, msg := range messages {
		if err != nil && strings.Contains(out, msg) {
			return nil
		}
	}
	return err
}
