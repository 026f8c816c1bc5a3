package engine

import "encoding/binary"

// Effects are what replication sends: not the commands that ran but the
// keys they changed, whose new states a replica stores as they are. A
// rate-limit decision, a script or an expiry then gives the same keyspace
// on a replica, whatever its clock says.
//
// While a sink is set, every key a shard changes (written, deleted, expired,
// evicted) is logged until whoever holds the shard's lock takes the log
// (TakeEffects) and sends each key's state as it is then. Taking the log
// under the same lock as the change keeps the order of the stream the order
// in which the keyspace changed. Commands take it after they run; the
// engine's own changes (the expiry sweeper) hand it to the sink.

// SetEffectSink turns effect logging on (sink not nil) or off. The engine
// calls sink, with the shard locked, after its own changes to a shard;
// sink must take the shard's log. It takes no lock, so that a command
// holding every shard (REPLICAOF inside MULTI) may call it: a change made
// by a command under way while logging starts is either logged or already
// in the shard when a reader that waits for the shard's lock gets it.
func (e *Engine) SetEffectSink(sink func(s *Shard)) {
	if sink == nil {
		e.fxSink.Store(nil)
		return
	}
	e.fxSink.Store(&sink)
}

// logEffect records that key of database db changed: in the expiry log
// when it expired, else in the effect log, where a key changed again right
// after itself (a counter incremented in a loop) is logged once.
func (s *Shard) logEffect(db int, key []byte, expired bool) {
	if expired {
		s.fxExp = binary.AppendUvarint(s.fxExp, uint64(db))
		s.fxExp = binary.AppendUvarint(s.fxExp, uint64(len(key)))
		s.fxExp = append(s.fxExp, key...)
		return
	}
	if s.fxLast >= 0 {
		d, k, _, ok := ReadChange(s.fxLog[s.fxLast:])
		if ok && d == db && string(k) == string(key) {
			return
		}
	}
	s.fxLast = len(s.fxLog)
	s.fxLog = binary.AppendUvarint(s.fxLog, uint64(db))
	s.fxLog = binary.AppendUvarint(s.fxLog, uint64(len(key)))
	s.fxLog = append(s.fxLog, key...)
}

// HasEffects reports whether keys changed or expired since the logs were
// last taken.
func (s *Shard) HasEffects() bool { return len(s.fxLog) > 0 || len(s.fxExp) > 0 }

// TakeEffects hands over the shard's effect log, replacing it with spare
// (emptied). The log has ReadChange's format; a key may appear more than
// once. Expired keys are not in it (TakeExpired). The caller holds the
// shard's lock.
func (s *Shard) TakeEffects(spare []byte) []byte {
	log := s.fxLog
	s.fxLog, s.fxLast = spare[:0], -1
	return log
}

// TakeExpired hands over the log of the keys deleted because they expired
// since it was last taken, in ReadChange's format, replacing it with
// spare: a command replicated as it is must be preceded by those
// deletions, since a replica expires nothing by itself. The caller holds
// the shard's lock.
func (s *Shard) TakeExpired(spare []byte) []byte {
	log := s.fxExp
	s.fxExp = spare[:0]
	return log
}

// sinkEffects gives the log of a change the engine made on its own to the
// sink. The caller holds the shard's lock.
func (s *Shard) sinkEffects() {
	if len(s.fxLog) == 0 {
		return
	}
	if sink := s.eng.fxSink.Load(); sink != nil {
		(*sink)(s)
	}
}

// SetReplica makes the engine hold keys as a replica does: a key past its
// expiry is hidden from every read but stays until the master's deletion
// arrives, and the sweeper deletes nothing; the master decides what
// expires. Off, expired keys are deleted when touched and swept.
func (e *Engine) SetReplica(on bool) { e.replica.Store(on) }

// Replica reports whether the engine holds keys as a replica.
func (e *Engine) Replica() bool { return e.replica.Load() }
