package commands

// persistenceCommands: SAVE, BGSAVE and LASTSAVE, over the snapshots.
func persistenceCommands() []*command {
	return []*command{
		cmd("save", 1, "admin noscript no_async_loading no_multi", cmdSave),
		cmd("bgsave", -1, "admin noscript no_async_loading", cmdBgSave),
		cmd("lastsave", 1, "loading stale fast", cmdLastSave),
	}
}

// SAVE, BGSAVE and LASTSAVE drive the snapshot
// store wired in through Server.Hooks; with persistence off they say so.

const msgNoPersistence = "persistence is off (limitkv was started with --persistence no)"

func cmdSave(c *Ctx) {
	if c.Srv.Hooks.Save == nil {
		c.W.Error(msgNoPersistence)
		return
	}
	if err := c.Srv.Hooks.Save(); err != nil {
		c.W.Error("snapshot failed: " + err.Error())
		return
	}
	c.W.OK()
}

func cmdBgSave(c *Ctx) {
	schedule := false
	if len(c.Args) > 2 || (len(c.Args) == 2 && !is(c.Args[1], "SCHEDULE")) {
		c.W.Error(msgSyntax)
		return
	}
	if len(c.Args) == 2 {
		schedule = true
	}
	if c.Srv.Hooks.BgSave == nil {
		c.W.Error(msgNoPersistence)
		return
	}
	reply, err := c.Srv.Hooks.BgSave(schedule)
	if err != nil {
		c.W.Error(err.Error())
		return
	}
	c.W.Simple(reply)
}

func cmdLastSave(c *Ctx) {
	if c.Srv.Hooks.LastSave == nil {
		c.W.Int(c.Srv.startTime.Unix())
		return
	}
	c.W.Int(c.Srv.Hooks.LastSave())
}
