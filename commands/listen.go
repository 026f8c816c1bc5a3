package commands

import (
	"errors"
	"strings"
)

// CONFIG SET port and bind, which Redis 7.0 applies at run time: the
// server listens anew (port: the plain listeners; bind: the plain and the
// TLS ones), connections already accepted stay, and a port or address
// that cannot be listened on answers an error and leaves the listeners
// as they were (Hooks.Listen, Hooks.Bind).

const (
	msgBindFailed  = "Failed to bind to specified addresses."
	msgBindTooMany = "Too many bind addresses specified."
	maxBindAddrs   = 16 // Redis's CONFIG_BINDADDR_MAX
)

var (
	// reconfPort is Redis's updatePort.
	reconfPort = &reconfigurer{apply: (*Config).applyPort}
	// reconfBind is Redis's applyBind.
	reconfBind = &reconfigurer{apply: (*Config).applyBind}
)

func (c *Config) applyPort() error {
	port, _ := c.byName["port"].parseInt(c.value("port"))
	if c.srv == nil || c.srv.Hooks.Listen == nil || c.srv.Hooks.Listen(int(port)) != nil {
		return errors.New(msgListenFailed)
	}
	return nil
}

func (c *Config) applyBind() error {
	if c.srv == nil || c.srv.Hooks.Bind == nil || c.srv.Hooks.Bind(c.value("bind")) != nil {
		return errors.New(msgBindFailed)
	}
	return nil
}

// mergeBind checks a bind value as Redis's setConfigBindOption does (16
// addresses at most) and keeps it with single spaces between addresses.
func mergeBind(_, v string) (string, error) {
	addrs := strings.Fields(v)
	if len(addrs) > maxBindAddrs {
		return "", errors.New(msgBindTooMany)
	}
	return strings.Join(addrs, " "), nil
}
