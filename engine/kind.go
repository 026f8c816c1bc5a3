package engine

import "errors"

// Kind is the type of a value as TYPE reports it.
type Kind uint8

const (
	KindNone Kind = iota
	KindString
	KindList
	KindSet
	KindZSet
	KindHash
	KindLimit
	KindStream
)

var kindNames = [...]string{"none", "string", "list", "set", "zset", "hash", "ratelimit", "stream"}

func (k Kind) String() string { return kindNames[k] }

// KindByName returns the kind that TYPE reports as name (case-insensitive),
// for SCAN's TYPE filter.
func KindByName(name []byte) (Kind, bool) {
	for i, n := range kindNames {
		if len(n) == len(name) && equalFold(n, name) {
			return Kind(i), true
		}
	}
	return KindNone, false
}

func equalFold(s string, b []byte) bool {
	for i := 0; i < len(s); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if s[i] != c {
			return false
		}
	}
	return true
}

// Errors returned by engine operations. The commands layer maps each to the
// exact reply Redis gives.
var (
	ErrWrongType    = errors.New("wrong type")
	ErrNotInteger   = errors.New("not an integer")
	ErrNotFloat     = errors.New("not a float")
	ErrOverflow     = errors.New("increment or decrement would overflow")
	ErrNaNOrInf     = errors.New("increment would produce NaN or Infinity")
	ErrNoSuchKey    = errors.New("no such key")
	ErrOutOfRange   = errors.New("index out of range")
	ErrStringTooBig = errors.New("string exceeds maximum allowed size")
)
