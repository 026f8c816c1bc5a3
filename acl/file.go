package acl

import (
	"errors"
	"fmt"
	"strings"
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
