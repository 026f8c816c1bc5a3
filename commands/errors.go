package commands

import (
	"errors"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/ratelimit"
)

// Redis's reply texts for common failures. They go to resp.Writer.Error,
// which adds the code "ERR " unless a text starts with an upper-case word
// of its own (WRONGTYPE); a text whose first word is upper case but is not
// a code (DB index...) spells ERR itself so that the word is not taken for
// one.
const (
	msgSyntax      = "syntax error"
	msgWrongType   = "WRONGTYPE Operation against a key holding the wrong kind of value"
	msgNotInteger  = "value is not an integer or out of range"
	msgNotFloat    = "value is not a valid float"
	msgOverflow    = "increment or decrement would overflow"
	msgNoSuchKey   = "no such key"
	msgOutOfRange  = "index out of range"
	msgDBIndex     = "ERR DB index is out of range"
	msgStringLimit = "string exceeds maximum allowed size (proto-max-bulk-len)"
	msgNaNOrInf    = "increment would produce NaN or Infinity"
)

// engineErrors maps the engine's sentinel errors to Redis's replies. Every
// engine error reaches the client through here.
var engineErrors = map[error]string{
	engine.ErrWrongType:     msgWrongType,
	engine.ErrNotInteger:    msgNotInteger,
	engine.ErrNotFloat:      msgNotFloat,
	engine.ErrOverflow:      msgOverflow,
	engine.ErrNaNOrInf:      msgNaNOrInf,
	engine.ErrNoSuchKey:     msgNoSuchKey,
	engine.ErrOutOfRange:    msgOutOfRange,
	engine.ErrStringTooBig:  msgStringLimit,
	ratelimit.ErrLoginEntry: "the list at this key holds an entry that is not a login time in ms",
}

// Err replies with the Redis text for err.
func (c *Ctx) Err(err error) {
	if msg, ok := engineErrors[err]; ok {
		c.W.Error(msg)
		return
	}
	var re *replyError
	if errors.As(err, &re) {
		c.W.Error(re.msg)
		return
	}
	c.W.Error("ERR " + err.Error())
}

// replyError carries an exact reply text through code that returns errors.
type replyError struct{ msg string }

func (e *replyError) Error() string { return e.msg }

func errReply(msg string) error { return &replyError{msg} }

// typed finds the T at key, for reading (a keyspace hit or miss counted)
// or for writing, as engine.Get does, and answers WRONGTYPE itself: ok is
// false when it did. A missing key gives a nil value.
func typed[T engine.Collection](c *Ctx, s *engine.Shard, key []byte, a engine.Access) (engine.Entry, T, bool) {
	e, v, err := engine.Get[T](s, c.DB, key, c.Now, a)
	if err != nil {
		c.Err(err)
		return e, v, false
	}
	return e, v, true
}
