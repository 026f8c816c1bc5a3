package commands

import (
	"math"
	"slices"
	"strconv"

	"github.com/limitkv/limitkv/engine"
)

// geoCommands: geo indexes, which are sorted sets.
func geoCommands() []*command {
	return []*command{
		cmd("geoadd", -5, "write denyoom as_is", cmdGeoAdd),
		cmd("geopos", -2, "readonly", cmdGeoPos),
		cmd("geodist", -4, "readonly", cmdGeoDist),
		cmd("geohash", -2, "readonly", cmdGeoHash),
		cmd("geosearch", -7, "readonly", cmdGeoSearch),
		cmd("geosearchstore", -8, "write denyoom as_is", cmdGeoSearchStore),
		cmd("georadius", -6, "write denyoom as_is", cmdGeoRadius),
		cmd("georadius_ro", -6, "readonly", cmdGeoRadiusRO),
		cmd("georadiusbymember", -5, "write denyoom as_is", cmdGeoRadiusByMember),
		cmd("georadiusbymember_ro", -5, "readonly", cmdGeoRadiusByMemberRO),
	}
}

// Geo commands, on sorted sets whose scores are 52-bit geohashes
// (engine/geo.go): GEOADD GEOPOS GEODIST GEOHASH GEOSEARCH GEOSEARCHSTORE
// GEORADIUS GEORADIUS_RO GEORADIUSBYMEMBER GEORADIUSBYMEMBER_RO.
//
// Bounds: a search visits at most nine score ranges of one set under its
// shard's lock, as Redis does; its work is that of a ZRANGEBYSCORE over
// the members near the center, and ANY with COUNT stops at COUNT found.

const (
	msgGeoMember = "could not decode requested zset member"
	msgGeoUnit   = "unsupported unit provided. please use M, KM, FT, MI"
)

// cmdGeoAdd turns its triples into scores and runs ZADD, as Redis does
// (and, like Redis, replicates the ZADD it ran).
func cmdGeoAdd(c *Ctx) {
	nx, xx := false, false
	i := 2
options:
	for ; i < len(c.Args); i++ {
		switch a := c.Args[i]; {
		case is(a, "NX"):
			nx = true
		case is(a, "XX"):
			xx = true
		case is(a, "CH"):
		default:
			break options
		}
	}
	if (len(c.Args)-i)%3 != 0 || (xx && nx) {
		c.W.Error(msgSyntax)
		return
	}
	args := make([][]byte, 0, i+(len(c.Args)-i)/3*2)
	args = append(args, []byte("zadd"))
	args = append(args, c.Args[1:i]...)
	for j := i; j < len(c.Args); j += 3 {
		lon, lat, ok := c.lonLat(j)
		if !ok {
			return
		}
		score, _ := engine.GeoScore(lon, lat)
		args = append(args, strconv.AppendUint(nil, score, 10), c.Args[j+2])
	}
	c.sent, c.Args = c.Args, args
	zadd(c, 0)
}

// lonLat parses a longitude and a latitude at i and i+1, replying Redis's
// error when one is not a number or the pair is out of bounds.
func (c *Ctx) lonLat(i int) (float64, float64, bool) {
	lon, ok := c.Float(i)
	if !ok {
		return 0, 0, false
	}
	lat, ok := c.Float(i + 1)
	if !ok {
		return 0, 0, false
	}
	if lon < engine.GeoLongMin || lon > engine.GeoLongMax || lat < engine.GeoLatMin || lat > engine.GeoLatMax {
		c.W.Error("invalid longitude,latitude pair " + cFixed(lon) + "," + cFixed(lat))
		return 0, 0, false
	}
	return lon, lat, true
}

// cFixed formats f as C's "%f".
func cFixed(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'f', 6, 64)
}

// geoUnit returns the meters in the unit named by argument i.
func (c *Ctx) geoUnit(i int) (float64, bool) {
	switch u := c.Args[i]; {
	case is(u, "M"):
		return 1, true
	case is(u, "KM"):
		return 1000, true
	case is(u, "FT"):
		return 0.3048, true
	case is(u, "MI"):
		return 1609.34, true
	}
	c.W.Error(msgGeoUnit)
	return 0, false
}

// geoFloat parses argument i as a double, replying msg when it is not one.
func (c *Ctx) geoFloat(i int, msg string) (float64, bool) {
	f, ok := engine.ParseFloat(c.Args[i])
	if !ok {
		c.W.Error(msg)
	}
	return f, ok
}

// geoRadius parses "radius unit" at i into the shape.
func (c *Ctx) geoRadius(i int, sh *engine.GeoShape) bool {
	r, ok := c.geoFloat(i, "need numeric radius")
	if !ok {
		return false
	}
	if r < 0 {
		c.W.Error("radius cannot be negative")
		return false
	}
	conv, ok := c.geoUnit(i + 1)
	if !ok {
		return false
	}
	sh.Box, sh.Radius, sh.Conversion = false, r, conv
	return true
}

// geoBox parses "width height unit" at i into the shape.
func (c *Ctx) geoBox(i int, sh *engine.GeoShape) bool {
	w, ok := c.geoFloat(i, "need numeric width")
	if !ok {
		return false
	}
	h, ok := c.geoFloat(i+1, "need numeric height")
	if !ok {
		return false
	}
	if h < 0 || w < 0 {
		c.W.Error("height or width cannot be negative")
		return false
	}
	conv, ok := c.geoUnit(i + 2)
	if !ok {
		return false
	}
	sh.Box, sh.Width, sh.Height, sh.Conversion = true, w, h, conv
	return true
}

func cmdGeoPos(c *Ctx) {
	_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
	if !ok {
		return
	}
	c.W.Array(len(c.Args) - 2)
	var buf []byte
	for _, m := range c.Args[2:] {
		var sc float64
		found := false
		if z != nil {
			sc, found = z.Score(m)
		}
		if !found {
			c.W.NullArray()
			continue
		}
		lon, lat := engine.GeoDecodeScore(sc)
		c.W.Array(2)
		buf = engine.AppendGeoCoord(buf[:0], lon)
		c.W.DoubleText(buf)
		buf = engine.AppendGeoCoord(buf[:0], lat)
		c.W.DoubleText(buf)
	}
}

func cmdGeoDist(c *Ctx) {
	toMeter := 1.0
	switch {
	case len(c.Args) == 5:
		var ok bool
		if toMeter, ok = c.geoUnit(4); !ok {
			return
		}
	case len(c.Args) > 5:
		c.W.Error(msgSyntax)
		return
	}
	_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
	if !ok {
		return
	}
	if z == nil {
		c.W.Null()
		return
	}
	s1, ok1 := z.Score(c.Args[2])
	s2, ok2 := z.Score(c.Args[3])
	if !ok1 || !ok2 {
		c.W.Null()
		return
	}
	lon1, lat1 := engine.GeoDecodeScore(s1)
	lon2, lat2 := engine.GeoDecodeScore(s2)
	c.W.Bulk(engine.AppendGeoDistance(nil, engine.GeoDistance(lon1, lat1, lon2, lat2)/toMeter))
}

func cmdGeoHash(c *Ctx) {
	_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
	if !ok {
		return
	}
	c.W.Array(len(c.Args) - 2)
	for _, m := range c.Args[2:] {
		var sc float64
		found := false
		if z != nil {
			sc, found = z.Score(m)
		}
		if !found {
			c.W.Null()
			continue
		}
		c.W.Bulk(engine.GeoHashString(sc))
	}
}

// geoFlags say which search command runs, as Redis's georadiusGeneric's.
type geoFlags uint8

const (
	geoCoords      geoFlags = 1 << iota // around a longitude and latitude
	geoMember                           // around a member
	geoNoStore                          // no STORE or STOREDIST
	geoSearch                           // GEOSEARCH's arguments
	geoSearchStore                      // GEOSEARCHSTORE: STOREDIST only
)

func cmdGeoRadius(c *Ctx)           { geoSearchCmd(c, 1, geoCoords) }
func cmdGeoRadiusRO(c *Ctx)         { geoSearchCmd(c, 1, geoCoords|geoNoStore) }
func cmdGeoRadiusByMember(c *Ctx)   { geoSearchCmd(c, 1, geoMember) }
func cmdGeoRadiusByMemberRO(c *Ctx) { geoSearchCmd(c, 1, geoMember|geoNoStore) }
func cmdGeoSearch(c *Ctx)           { geoSearchCmd(c, 1, geoSearch) }
func cmdGeoSearchStore(c *Ctx)      { geoSearchCmd(c, 2, geoSearch|geoSearchStore) }

// geoPoint is a member found by a search.
type geoPoint struct {
	member   string
	lon, lat float64
	dist     float64
	score    float64
}

const (
	geoSortNone = iota
	geoSortAsc
	geoSortDesc
)

// geoSearchCmd is Redis's georadiusGeneric: the key's type first, then the
// center and the shape of the legacy forms, then the options in one pass,
// then the checks that need all of them.
func geoSearchCmd(c *Ctx, src int, flags geoFlags) {
	srcShard := c.Shard(c.Args[src])
	_, z, ok := typed[*engine.ZSet](c, srcShard, c.Args[src], engine.ForRead)
	if !ok {
		return
	}
	c.flushNotes(srcShard)
	var sh engine.GeoShape
	var base int
	var storeKey []byte
	storeDist := false
	switch {
	case flags&geoCoords != 0:
		base = 6
		if sh.Lon, sh.Lat, ok = c.lonLat(2); !ok {
			return
		}
		if !c.geoRadius(4, &sh) {
			return
		}
	case flags&geoMember != 0 && z == nil:
		base = 5 // parse the options all the same, for the reply's kind
	case flags&geoMember != 0:
		base = 5
		sc, found := z.Score(c.Args[2])
		if !found {
			c.W.Error(msgGeoMember)
			return
		}
		sh.Lon, sh.Lat = engine.GeoDecodeScore(sc)
		if !c.geoRadius(3, &sh) {
			return
		}
	default:
		base = 2
		if flags&geoSearchStore != 0 {
			base = 3
			storeKey = c.Args[1]
		}
	}
	withDist, withHash, withCoord, anyOpt := false, false, false, false
	fromMember, fromLoc, byRadius, byBox := false, false, false, false
	sort := geoSortNone
	var count int64
	search := flags&geoSearch != 0
	for i := base; i < len(c.Args); i++ {
		a, left := c.Args[i], len(c.Args)-i-1
		switch {
		case is(a, "WITHDIST"):
			withDist = true
		case is(a, "WITHHASH"):
			withHash = true
		case is(a, "WITHCOORD"):
			withCoord = true
		case is(a, "ANY"):
			anyOpt = true
		case is(a, "ASC"):
			sort = geoSortAsc
		case is(a, "DESC"):
			sort = geoSortDesc
		case is(a, "COUNT") && left >= 1:
			if count, ok = c.Int(i + 1); !ok {
				return
			}
			if count <= 0 {
				c.W.Error("ERR COUNT must be > 0")
				return
			}
			i++
		case (is(a, "STORE") || is(a, "STOREDIST")) && left >= 1 && flags&geoNoStore == 0 && !search:
			storeKey = c.Args[i+1]
			storeDist = is(a, "STOREDIST")
			i++
		case is(a, "STOREDIST") && flags&geoSearchStore != 0:
			storeDist = true
		case is(a, "FROMMEMBER") && left >= 1 && search && !fromLoc:
			fromMember = true
			i++
			if z == nil {
				continue // no key: an empty reply once all is parsed
			}
			sc, found := z.Score(c.Args[i])
			if !found {
				c.W.Error(msgGeoMember)
				return
			}
			sh.Lon, sh.Lat = engine.GeoDecodeScore(sc)
		case is(a, "FROMLONLAT") && left >= 2 && search && !fromMember:
			if sh.Lon, sh.Lat, ok = c.lonLat(i + 1); !ok {
				return
			}
			fromLoc = true
			i += 2
		case is(a, "BYRADIUS") && left >= 2 && search && !byBox:
			if !c.geoRadius(i+1, &sh) {
				return
			}
			byRadius = true
			i += 2
		case is(a, "BYBOX") && left >= 3 && search && !byRadius:
			if !c.geoBox(i+1, &sh) {
				return
			}
			byBox = true
			i += 3
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	switch {
	case storeKey != nil && (withDist || withHash || withCoord):
		what := "STORE option in GEORADIUS"
		if flags&geoSearchStore != 0 {
			what = "GEOSEARCHSTORE"
		}
		c.W.Error("ERR " + what + " is not compatible with WITHDIST, WITHHASH and WITHCOORD options")
		return
	case search && !fromMember && !fromLoc:
		c.W.Error("exactly one of FROMMEMBER or FROMLONLAT can be specified for " + string(c.Args[0]))
		return
	case search && !byRadius && !byBox:
		c.W.Error("exactly one of BYRADIUS and BYBOX can be specified for " + string(c.Args[0]))
		return
	case anyOpt && count == 0:
		c.W.Error("the ANY argument requires COUNT argument")
		return
	}
	if z == nil {
		if storeKey != nil {
			c.storeZItems(storeKey, nil, "", true)
		} else {
			c.W.Array(0)
		}
		return
	}
	if count != 0 && sort == geoSortNone && !anyOpt {
		sort = geoSortAsc
	}
	limit := 0
	if anyOpt {
		limit = int(min(count, int64(z.Len())))
	}
	points := geoCollect(c, z, &sh, limit)
	if len(points) == 0 && storeKey == nil {
		c.W.Array(0)
		return
	}
	returned := len(points)
	if count != 0 && int64(returned) > count {
		returned = int(count)
	}
	if sort != geoSortNone {
		slices.SortStableFunc(points, func(a, b geoPoint) int {
			r := 0
			switch {
			case a.dist > b.dist:
				r = 1
			case a.dist < b.dist:
				r = -1
			}
			if sort == geoSortDesc {
				r = -r
			}
			return r
		})
	}
	points = points[:returned]
	if storeKey != nil {
		items := make([]engine.ZItem, len(points))
		for i, p := range points {
			sc := p.score
			if storeDist {
				sc = p.dist / sh.Conversion
			}
			items[i] = engine.ZItem{M: p.member, S: sc}
		}
		engine.SortZItems(items)
		event := "georadiusstore"
		if search {
			event = "geosearchstore"
		}
		c.storeZItems(storeKey, items, event, true)
		return
	}
	opts := 0
	for _, w := range []bool{withDist, withCoord, withHash} {
		if w {
			opts++
		}
	}
	c.W.Array(len(points))
	var buf []byte
	for _, p := range points {
		if opts > 0 {
			c.W.Array(opts + 1)
		}
		c.W.BulkString(p.member)
		if withDist {
			c.W.Bulk(engine.AppendGeoDistance(buf[:0], p.dist/sh.Conversion))
		}
		if withHash {
			c.W.Int(int64(p.score))
		}
		if withCoord {
			c.W.Array(2)
			buf = engine.AppendGeoCoord(buf[:0], p.lon)
			c.W.DoubleText(buf)
			buf = engine.AppendGeoCoord(buf[:0], p.lat)
			c.W.DoubleText(buf)
		}
	}
}

// geoCollect finds the members of z in the shape, box after box in
// Redis's order, each box in score order; with limit > 0 it stops once
// it has that many.
func geoCollect(c *Ctx, z *engine.ZSet, sh *engine.GeoShape, limit int) []geoPoint {
	var points []geoPoint
	full := func() bool { return limit > 0 && len(points) >= limit }
	for _, box := range sh.Boxes() {
		if full() {
			break
		}
		lo, hi := z.ScoreSpan(engine.ScoreRange{Min: float64(box[0]), Max: float64(box[1]), MaxEx: true})
		z.Range(lo, hi, false, c.buf[:0], func(m []byte, sc float64) bool {
			if lon, lat, dist, in := sh.Within(sc); in {
				points = append(points, geoPoint{string(m), lon, lat, dist, sc})
			}
			return !full()
		})
	}
	return points
}
