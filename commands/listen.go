package commands

import (
	"errors"

	"github.com/limitkv/limitkv/config"
)

// CONFIG SET port and bind, which Redis 7.0 applies at run time: the
// server listens anew (port: the plain listeners; bind: the plain and the
// TLS ones), connections already accepted stay, and a port or address
// that cannot be listened on answers an error and leaves the listeners
// as they were (Hooks.Listen, Hooks.Bind).

const msgBindFailed = "Failed to bind to specified addresses."

// portEffects wires port and bind: port is Redis's updatePort, bind its
// applyBind.
func (c *Config) portEffects() map[string]config.Effect {
	return map[string]config.Effect{
		"port": {Reconf: &config.Reconfigurer{Apply: c.applyPort}},
		"bind": {Reconf: &config.Reconfigurer{Apply: c.applyBind}},
	}
}

func (c *Config) applyPort(v config.Values) error {
	port := v.Int("port")
	if c.srv == nil || c.srv.Hooks.Listen == nil || c.srv.Hooks.Listen(int(port)) != nil {
		return errors.New(msgListenFailed)
	}
	return nil
}

func (c *Config) applyBind(v config.Values) error {
	if c.srv == nil || c.srv.Hooks.Bind == nil || c.srv.Hooks.Bind(v.Get("bind")) != nil {
		return errors.New(msgBindFailed)
	}
	return nil
}
