package commands

// streamGroupCommands: the consumer groups' commands (XGROUP, XACK,
// XPENDING, XCLAIM, XAUTOCLAIM) and XINFO.
func streamGroupCommands() []*command {
	return []*command{}
}
