package resp

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
)

// Limits are the protocol and buffer limits. They can change at run time
// (CONFIG SET); connections read them as they go.
type Limits struct {
	MaxBulkLen    atomic.Int64 // proto-max-bulk-len
	QueryBufLimit atomic.Int64 // client-query-buffer-limit
	output        [NumClasses]atomic.Pointer[OutputLimit]
}

// NewLimits returns Redis's defaults.
func NewLimits() *Limits {
	l := &Limits{}
	l.MaxBulkLen.Store(512 << 20)
	l.QueryBufLimit.Store(1 << 30)
	l.SetOutputLimits(DefaultOutputLimits)
	return l
}

// Output returns the output buffer limit of a class of clients.
func (l *Limits) Output(c OutputClass) OutputLimit { return *l.output[c].Load() }

// SetOutput changes the output buffer limit of a class of clients.
func (l *Limits) SetOutput(c OutputClass, v OutputLimit) { l.output[c].Store(&v) }

// Redis's protocol limits (server.h).
const (
	maxInline       = 64 * 1024 // PROTO_INLINE_MAX_SIZE
	maxMultibulk    = 1<<31 - 1 // INT_MAX
	unauthMultibulk = 10
	unauthBulk      = 16384
	// BigArg is PROTO_MBULK_BIG_ARG: a bulk argument this long or longer is
	// read from the socket into an allocation of its own, never copied and
	// never reused by the connection after its request.
	BigArg = 32 * 1024
)

// ProtocolError is a request the server refused. The connection is closed
// after its reply is sent.
type ProtocolError struct {
	// Msg is the reply, without "-ERR "; empty to close without a reply
	// (the query buffer limit).
	Msg string
	// Head holds the first bytes of the refused request, for the log.
	Head string
}

func (e *ProtocolError) Error() string {
	if e.Msg == "" {
		return "query buffer limit exceeded"
	}
	return e.Msg
}

// OutputClass is a class of clients for client-output-buffer-limit.
type OutputClass uint8

// The classes, in Redis's order.
const (
	ClassNormal OutputClass = iota
	ClassReplica
	ClassPubSub
	NumClasses
)

var classNames = [NumClasses]string{"normal", "slave", "pubsub"}

func (c OutputClass) String() string { return classNames[c] }

// OutputLimit is one class's client-output-buffer-limit: a connection whose
// unsent output passes Hard bytes is closed at once; one that stays above
// Soft bytes for more than SoftSeconds is closed then. Zero disables a limit.
type OutputLimit struct {
	Hard, Soft  int64
	SoftSeconds int64
}

// OutputLimits holds the limit of each class.
type OutputLimits [NumClasses]OutputLimit

// DefaultOutputLimits are Redis's: "normal 0 0 0 slave 256mb 64mb 60
// pubsub 32mb 8mb 60".
var DefaultOutputLimits = OutputLimits{
	ClassNormal:  {},
	ClassReplica: {Hard: 256 << 20, Soft: 64 << 20, SoftSeconds: 60},
	ClassPubSub:  {Hard: 32 << 20, Soft: 8 << 20, SoftSeconds: 60},
}

// String renders the limits as CONFIG GET client-output-buffer-limit does.
func (l OutputLimits) String() string {
	var b []byte
	for c, v := range l {
		if c > 0 {
			b = append(b, ' ')
		}
		b = append(b, classNames[c]...)
		for _, n := range []int64{v.Hard, v.Soft, v.SoftSeconds} {
			b = append(b, ' ')
			b = strconv.AppendInt(b, n, 10)
		}
	}
	return string(b)
}

// ParseOutputLimits applies a client-output-buffer-limit value, "<class>
// <hard> <soft> <soft-seconds>" repeated, to cur and returns the result;
// classes the value does not name keep their limits. Errors are Redis's
// texts. memory parses a size as the configuration does (1mb, 64kb...).
func ParseOutputLimits(cur OutputLimits, v string, memory func(string) (int64, bool)) (OutputLimits, error) {
	if v == "" {
		return cur, nil
	}
	f := strings.Split(v, " ") // as sdssplitlen: two spaces make an empty field
	if len(f)%4 != 0 {
		return cur, errors.New("Wrong number of arguments in buffer limit configuration.")
	}
	out := cur
	for i := 0; i < len(f); i += 4 {
		var c OutputClass
		switch strings.ToLower(f[i]) {
		case "normal":
			c = ClassNormal
		case "slave", "replica":
			c = ClassReplica
		case "pubsub":
			c = ClassPubSub
		default:
			return cur, errors.New("Invalid client class specified in buffer limit configuration.")
		}
		hard, ok1 := memory(f[i+1])
		soft, ok2 := memory(f[i+2])
		secs, ok3 := parseSoftSeconds(f[i+3])
		if !ok1 || !ok2 || !ok3 {
			return cur, errors.New("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
		}
		out[c] = OutputLimit{Hard: hard, Soft: soft, SoftSeconds: secs}
	}
	return out, nil
}

// parseSoftSeconds reads soft-seconds as Redis does: strtoll over the whole
// field, then stored in an int, refused when that is negative.
func parseSoftSeconds(s string) (int64, bool) {
	d := s
	if d != "" && (d[0] == '+' || d[0] == '-') {
		d = d[1:]
	}
	if d == "" {
		return 0, false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // out of range: strtoll saturates
		n = 1<<63 - 1
		if s[0] == '-' {
			n = -1 << 63
		}
	}
	v := int64(int32(n))
	return v, v >= 0
}

// OutputLimits returns the current limits of every class.
func (l *Limits) OutputLimits() OutputLimits {
	var out OutputLimits
	for c := range out {
		out[c] = l.Output(OutputClass(c))
	}
	return out
}

// SetOutputLimits replaces the limits of every class.
func (l *Limits) SetOutputLimits(v OutputLimits) {
	for c := range v {
		l.SetOutput(OutputClass(c), v[c])
	}
}
