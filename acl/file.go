package acl

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FileUser is a user of an aclfile: its name and its rules, sealed.
type FileUser struct {
	Name  string
	Rules *Rules
}

// ParseFile reads the users of an aclfile, as Redis's ACLLoadFromFile
// does: the errors of every line are collected, and any error means no
// user at all, so that a file with a mistake changes nothing. path is for
// the messages. allChannels is acl-pubsub-default.
func ParseFile(path string, data []byte, c *Catalog, allChannels bool) ([]FileUser, error) {
	var users []FileUser
	seen := map[string]bool{}
	var errs strings.Builder
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.Trim(line, " \t\r\n")
		if line == "" {
			continue
		}
		argv := strings.Split(line, " ")
		if argv[0] != "user" || len(argv) < 2 {
			fmt.Fprintf(&errs, "%s:%d should start with user keyword followed by the username. ", path, n)
			continue
		}
		if HasSpaces(argv[1]) {
			fmt.Fprintf(&errs, "'%s:%d: username '%s' contains invalid characters. ", path, n, argv[1])
			continue
		}
		if seen[argv[1]] {
			fmt.Fprintf(&errs, "WARNING: Duplicate user '%s' found on line %d. ", argv[1], n)
			continue
		}
		seen[argv[1]] = true
		r := NewRules(c, allChannels)
		ops, open := MergeSelectorArgs(argv[2:])
		if open >= 0 {
			fmt.Fprintf(&errs, "%s:%d: Unmatched parenthesis in selector definition.", path, n)
			continue
		}
		syntaxErr := false
		for _, op := range ops {
			op = strings.Trim(op, "\t\r\n")
			err := r.Set(op, allChannels)
			switch {
			case err == nil:
			case err == ErrNoEnt:
				fmt.Fprintf(&errs, "%s:%d: Error in applying operation '%s': %v. ", path, n, op, err)
			case !syntaxErr:
				fmt.Fprintf(&errs, "%s:%d: %v. ", path, n, err)
				syntaxErr = true
			}
		}
		users = append(users, FileUser{argv[1], r.Seal()})
	}
	if errs.Len() > 0 {
		return nil, errors.New(errs.String() + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
	}
	return users, nil
}

// LoadFile reads and parses an aclfile (see ParseFile), with Redis's
// message when the file cannot be opened.
func LoadFile(path string, c *Catalog, allChannels bool) ([]FileUser, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.New("Error loading ACLs, opening file '" + path + "': " + strerror(err))
	}
	return ParseFile(path, data, c, allChannels)
}

// strerror gives an I/O error as C's strerror does ("No such file or
// directory"), since Redis's messages quote it.
func strerror(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg := errno.Error()
		return strings.ToUpper(msg[:1]) + msg[1:]
	}
	return err.Error()
}

// UserLine is a user as ACL LIST and the aclfile write it:
// "user <name> <rules>".
func UserLine(name string, r *Rules) string {
	return "user " + name + " " + r.Describe()
}

// SaveFile writes users to the aclfile at path, one UserLine each,
// atomically: a temporary file beside it, synced, then a rename, so that a
// crash leaves the old file or the new one, never a part.
func SaveFile(path string, users []FileUser) error {
	var b strings.Builder
	for _, u := range users {
		b.WriteString(UserLine(u.Name, u.Rules))
		b.WriteByte('\n')
	}
	tmp := path + ".tmp-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(b.String())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// ConfigUser is a "user" line of the config file: the user's name, then
// its rules, and where it was, for the messages.
type ConfigUser struct {
	Args []string
	File string
	Line int
}

// Ops checks the line's name and selectors as Redis does and returns the name and the rules to
// apply, with each selector's words joined into one.
func (u ConfigUser) Ops() (name string, ops []string, err error) {
	name = u.Args[0]
	if HasSpaces(name) {
		return "", nil, fmt.Errorf("%s:%d: Spaces not allowed in ACL usernames", u.File, u.Line)
	}
	ops, open := MergeSelectorArgs(u.Args[1:])
	if open >= 0 {
		return "", nil, fmt.Errorf("%s:%d: Error in user declaration '%s': Unmatched parenthesis in acl selector", u.File, u.Line, u.Args[1+open])
	}
	return name, ops, nil
}

// Apply applies ops (from Ops) to r, stopping at the first that fails,
// with the line's place in the message.
func (u ConfigUser) Apply(r *Rules, ops []string, allChannels bool) error {
	for _, op := range ops {
		if err := r.Set(op, allChannels); err != nil {
			return fmt.Errorf("%s:%d: Error loading ACL rule '%s' for the user named '%s': %v", u.File, u.Line, op, u.Args[0], err)
		}
	}
	return nil
}
