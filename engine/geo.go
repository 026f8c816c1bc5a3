package engine

import (
	"math"
	"strconv"
)

// Geohashes as Redis 7.0 computes them (its geohash.c and
// geohash_helper.c): a point is a 52-bit score, latitude and longitude
// each cut into 26 bits over [-85.05112878, 85.05112878] and [-180, 180]
// and interleaved, longitude in the odd bits. The arithmetic follows
// Redis's C line by line in float64, with explicit conversions where a
// product is added so that no fused multiply-add changes a last bit:
// scores, coordinates and distances come out bit for bit as Redis's.

// Geo bounds, as Redis's GEO_* constants.
const (
	GeoLatMin  = -85.05112878
	GeoLatMax  = 85.05112878
	GeoLongMin = -180.0
	GeoLongMax = 180.0
	geoStepMax = 26
)

const (
	earthRadius = 6372797.560856
	mercatorMax = 20037726.37
)

// degToRad is C's M_PI / 180.0, computed at run time in float64 as the C
// compiler folds it (a Go constant expression would be rounded once,
// from the exact quotient, and may differ in the last bit).
var (
	piF      = math.Pi
	degToRad = piF / 180.0
)

func degRad(a float64) float64 { return a * degToRad }
func radDeg(a float64) float64 { return a / degToRad }

// GeoHash is a geohash of step*2 bits.
type GeoHash struct {
	Bits uint64
	Step uint8
}

func (h GeoHash) zero() bool { return h.Bits == 0 && h.Step == 0 }

type geoRange struct{ min, max float64 }

// GeoArea is the box a geohash covers.
type GeoArea struct {
	Hash      GeoHash
	Longitude geoRange
	Latitude  geoRange
}

var (
	geoLongRange = geoRange{GeoLongMin, GeoLongMax}
	geoLatRange  = geoRange{GeoLatMin, GeoLatMax}
)

func interleave64(xlo, ylo uint32) uint64 {
	b := [...]uint64{0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F,
		0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF}
	s := [...]uint{1, 2, 4, 8, 16}
	x, y := uint64(xlo), uint64(ylo)
	for i := 4; i >= 0; i-- {
		x = (x | x<<s[i]) & b[i]
		y = (y | y<<s[i]) & b[i]
	}
	return x | y<<1
}

func deinterleave64(v uint64) uint64 {
	b := [...]uint64{0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F,
		0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF}
	s := [...]uint{0, 1, 2, 4, 8, 16}
	x, y := v, v>>1
	for i := 0; i < 6; i++ {
		x = (x | x>>s[i]) & b[i]
		y = (y | y>>s[i]) & b[i]
	}
	return x | y<<32
}

// geoEncode is Redis's geohashEncode over the ranges given.
func geoEncode(lon, lat geoRange, longitude, latitude float64, step uint8) (GeoHash, bool) {
	if step > 32 || step == 0 {
		return GeoHash{}, false
	}
	if longitude > GeoLongMax || longitude < GeoLongMin || latitude > GeoLatMax || latitude < GeoLatMin {
		return GeoHash{}, false
	}
	if latitude < lat.min || latitude > lat.max || longitude < lon.min || longitude > lon.max {
		return GeoHash{}, false
	}
	latOff := (latitude - lat.min) / (lat.max - lat.min)
	longOff := (longitude - lon.min) / (lon.max - lon.min)
	latOff *= float64(uint64(1) << step)
	longOff *= float64(uint64(1) << step)
	return GeoHash{Bits: interleave64(uint32(latOff), uint32(longOff)), Step: step}, true
}

// GeoScore returns the sorted-set score GEOADD gives a point: its 52-bit
// geohash. ok is false outside the bounds.
func GeoScore(longitude, latitude float64) (uint64, bool) {
	h, ok := geoEncode(geoLongRange, geoLatRange, longitude, latitude, geoStepMax)
	if !ok {
		return 0, false
	}
	return h.align52(), true
}

func (h GeoHash) align52() uint64 { return h.Bits << (52 - uint(h.Step)*2) }

// geoDecode is Redis's geohashDecode.
func geoDecode(lon, lat geoRange, h GeoHash) (GeoArea, bool) {
	if h.zero() {
		return GeoArea{}, false
	}
	sep := deinterleave64(h.Bits)
	latScale := lat.max - lat.min
	longScale := lon.max - lon.min
	ilato := uint32(sep)
	ilono := uint32(sep >> 32)
	div := float64(uint64(1) << h.Step)
	a := GeoArea{Hash: h}
	a.Latitude.min = lat.min + float64(float64(ilato)*1.0/div*latScale)
	a.Latitude.max = lat.min + float64(float64(ilato+1)*1.0/div*latScale)
	a.Longitude.min = lon.min + float64(float64(ilono)*1.0/div*longScale)
	a.Longitude.max = lon.min + float64(float64(ilono+1)*1.0/div*longScale)
	return a, true
}

// center is Redis's geohashDecodeAreaToLongLat.
func (a *GeoArea) center() (float64, float64) {
	x := (a.Longitude.min + a.Longitude.max) / 2
	x = min(max(x, GeoLongMin), GeoLongMax)
	y := (a.Latitude.min + a.Latitude.max) / 2
	y = min(max(y, GeoLatMin), GeoLatMax)
	return x, y
}

// scoreBits converts a score to the hash bits as C's (uint64_t) cast does
// on x86-64, for the scores of members GEOADD did not add.
func scoreBits(score float64) uint64 {
	switch {
	case score >= 0 && score < 1<<64:
		return uint64(score)
	case score < 0 && score > -(1<<63):
		return uint64(int64(score))
	}
	return 1 << 63
}

// GeoDecodeScore returns the longitude and latitude a score stands for,
// as Redis's decodeGeohash: any score decodes, clamped to the bounds.
func GeoDecodeScore(score float64) (float64, float64) {
	a, _ := geoDecode(geoLongRange, geoLatRange, GeoHash{Bits: scoreBits(score), Step: geoStepMax})
	return a.center()
}

const geoAlphabet = "0123456789bcdefghjkmnpqrstuvwxyz"

// GeoHashString returns GEOHASH's 11-character string for a score: the
// point re-encoded over the standard ranges [-180, 180] x [-90, 90].
func GeoHashString(score float64) []byte {
	x, y := GeoDecodeScore(score)
	h, _ := geoEncode(geoRange{-180, 180}, geoRange{-90, 90}, x, y, 26)
	buf := make([]byte, 11)
	for i := 0; i < 11; i++ {
		idx := 0
		if i < 10 {
			idx = int(h.Bits>>(52-uint((i+1)*5))) & 0x1f
		}
		buf[i] = geoAlphabet[idx]
	}
	return buf
}

// geoLatDistance is Redis's geohashGetLatDistance.
func geoLatDistance(lat1, lat2 float64) float64 {
	return earthRadius * math.Abs(degRad(lat2)-degRad(lat1))
}

// GeoDistance is Redis's geohashGetDistance: the haversine distance in
// meters.
func GeoDistance(lon1, lat1, lon2, lat2 float64) float64 {
	lon1r, lon2r := degRad(lon1), degRad(lon2)
	v := geoSin((lon2r - lon1r) / 2)
	if v == 0 {
		return geoLatDistance(lat1, lat2)
	}
	lat1r, lat2r := degRad(lat1), degRad(lat2)
	u := geoSin((lat2r - lat1r) / 2)
	a := float64(u*u) + float64(float64(geoCos(lat1r)*geoCos(lat2r))*v*v)
	return 2.0 * earthRadius * geoAsin(math.Sqrt(a))
}

// GeoShape is a search area: a circle of Radius, or a Width x Height box,
// around (Lon, Lat), its sizes in the unit of Conversion meters.
type GeoShape struct {
	Lon, Lat      float64
	Box           bool
	Radius        float64
	Width, Height float64
	Conversion    float64
	bounds        [4]float64
}

// Within reports whether the point of score lies in the shape, and
// returns its coordinates and its distance from the center in meters.
// Points clearly outside are told by Go's math library, a few bits off
// at most and 30 times faster; the exact distance is computed for the
// others, so that points on the edge fall as they do in Redis.
func (s *GeoShape) Within(score float64) (lon, lat, dist float64, ok bool) {
	lon, lat = GeoDecodeScore(score)
	if !s.Box {
		r := s.Radius * s.Conversion
		if geoDistanceFast(s.Lon, s.Lat, lon, lat) > r*(1+geoFastMargin) {
			return lon, lat, 0, false
		}
		dist = GeoDistance(s.Lon, s.Lat, lon, lat)
		return lon, lat, dist, dist <= r
	}
	w, h := s.Width*s.Conversion, s.Height*s.Conversion
	if geoLatDistance(lat, s.Lat) > h/2 {
		return lon, lat, 0, false
	}
	if geoDistanceFast(lon, lat, s.Lon, lat) > w/2*(1+geoFastMargin) ||
		GeoDistance(lon, lat, s.Lon, lat) > w/2 {
		return lon, lat, 0, false
	}
	return lon, lat, GeoDistance(s.Lon, s.Lat, lon, lat), true
}

// geoFastMargin is far above the few ulps between geoDistanceFast and
// GeoDistance.
const geoFastMargin = 1e-9

// geoDistanceFast is GeoDistance with Go's math library.
func geoDistanceFast(lon1, lat1, lon2, lat2 float64) float64 {
	lon1r, lon2r := degRad(lon1), degRad(lon2)
	v := math.Sin((lon2r - lon1r) / 2)
	if v == 0 {
		return geoLatDistance(lat1, lat2)
	}
	lat1r, lat2r := degRad(lat1), degRad(lat2)
	u := math.Sin((lat2r - lat1r) / 2)
	a := u*u + math.Cos(lat1r)*math.Cos(lat2r)*v*v
	return 2.0 * earthRadius * math.Asin(math.Sqrt(a))
}

func geoEstimateSteps(rangeMeters, lat float64) uint8 {
	if rangeMeters == 0 {
		return 26
	}
	step := 1
	for rangeMeters < mercatorMax {
		rangeMeters *= 2
		step++
	}
	step -= 2
	if lat > 66 || lat < -66 {
		step--
		if lat > 80 || lat < -80 {
			step--
		}
	}
	return uint8(min(max(step, 1), 26))
}

func (s *GeoShape) boundingBox() {
	var height, width float64
	if s.Box {
		height, width = s.Conversion*(s.Height/2), s.Conversion*(s.Width/2)
	} else {
		height, width = s.Conversion*s.Radius, s.Conversion*s.Radius
	}
	latDelta := radDeg(height / earthRadius)
	longDeltaTop := radDeg(width / earthRadius / geoCos(degRad(s.Lat+latDelta)))
	longDeltaBottom := radDeg(width / earthRadius / geoCos(degRad(s.Lat-latDelta)))
	if s.Lat < 0 {
		s.bounds[0], s.bounds[2] = s.Lon-longDeltaBottom, s.Lon+longDeltaBottom
	} else {
		s.bounds[0], s.bounds[2] = s.Lon-longDeltaTop, s.Lon+longDeltaTop
	}
	s.bounds[1], s.bounds[3] = s.Lat-latDelta, s.Lat+latDelta
}

func (h GeoHash) moveX(d int) GeoHash {
	x := h.Bits & 0xaaaaaaaaaaaaaaaa
	y := h.Bits & 0x5555555555555555
	zz := uint64(0x5555555555555555) >> (64 - uint(h.Step)*2)
	if d > 0 {
		x += zz + 1
	} else {
		x |= zz
		x -= zz + 1
	}
	x &= uint64(0xaaaaaaaaaaaaaaaa) >> (64 - uint(h.Step)*2)
	h.Bits = x | y
	return h
}

func (h GeoHash) moveY(d int) GeoHash {
	x := h.Bits & 0xaaaaaaaaaaaaaaaa
	y := h.Bits & 0x5555555555555555
	zz := uint64(0xaaaaaaaaaaaaaaaa) >> (64 - uint(h.Step)*2)
	if d > 0 {
		y += zz + 1
	} else {
		y |= zz
		y -= zz + 1
	}
	y &= uint64(0x5555555555555555) >> (64 - uint(h.Step)*2)
	h.Bits = x | y
	return h
}

// Neighbour indexes, in the order Redis searches the boxes.
const (
	geoCenter = iota
	geoNorth
	geoSouth
	geoEast
	geoWest
	geoNorthEast
	geoNorthWest
	geoSouthEast
	geoSouthWest
)

func geoNeighbors(h GeoHash) [9]GeoHash {
	var n [9]GeoHash
	n[geoCenter] = h
	n[geoEast] = h.moveX(1)
	n[geoWest] = h.moveX(-1)
	n[geoSouth] = h.moveY(-1)
	n[geoNorth] = h.moveY(1)
	n[geoNorthWest] = h.moveX(-1).moveY(1)
	n[geoNorthEast] = h.moveX(1).moveY(1)
	n[geoSouthEast] = h.moveX(1).moveY(-1)
	n[geoSouthWest] = h.moveX(-1).moveY(-1)
	return n
}

// Boxes returns the score ranges [min, max) a search of the shape visits,
// in Redis's order (the center box, then N S E W NE NW SE SW), leaving out
// the boxes Redis leaves out and a box equal to the one visited before it,
// as geohashCalculateAreasByShapeWGS84 and membersOfAllNeighbors do.
func (s *GeoShape) Boxes() [][2]uint64 {
	s.boundingBox()
	minLon, minLat, maxLon, maxLat := s.bounds[0], s.bounds[1], s.bounds[2], s.bounds[3]
	radius := s.Radius
	if s.Box {
		radius = math.Sqrt(float64((s.Width/2)*(s.Width/2)) + float64((s.Height/2)*(s.Height/2)))
	}
	radius *= s.Conversion
	steps := geoEstimateSteps(radius, s.Lat)
	hash, _ := geoEncode(geoLongRange, geoLatRange, s.Lon, s.Lat, steps)
	n := geoNeighbors(hash)
	area, _ := geoDecode(geoLongRange, geoLatRange, hash)
	decrease := false
	{
		north, _ := geoDecode(geoLongRange, geoLatRange, n[geoNorth])
		south, _ := geoDecode(geoLongRange, geoLatRange, n[geoSouth])
		east, _ := geoDecode(geoLongRange, geoLatRange, n[geoEast])
		west, _ := geoDecode(geoLongRange, geoLatRange, n[geoWest])
		if north.Latitude.max < maxLat || south.Latitude.min > minLat ||
			east.Longitude.max < maxLon || west.Longitude.min > minLon {
			decrease = true
		}
	}
	if steps > 1 && decrease {
		steps--
		hash, _ = geoEncode(geoLongRange, geoLatRange, s.Lon, s.Lat, steps)
		n = geoNeighbors(hash)
		area, _ = geoDecode(geoLongRange, geoLatRange, hash)
	}
	if steps >= 2 {
		if area.Latitude.min < minLat {
			n[geoSouth], n[geoSouthWest], n[geoSouthEast] = GeoHash{}, GeoHash{}, GeoHash{}
		}
		if area.Latitude.max > maxLat {
			n[geoNorth], n[geoNorthEast], n[geoNorthWest] = GeoHash{}, GeoHash{}, GeoHash{}
		}
		if area.Longitude.min < minLon {
			n[geoWest], n[geoSouthWest], n[geoNorthWest] = GeoHash{}, GeoHash{}, GeoHash{}
		}
		if area.Longitude.max > maxLon {
			n[geoEast], n[geoSouthEast], n[geoNorthEast] = GeoHash{}, GeoHash{}, GeoHash{}
		}
	}
	var out [][2]uint64
	last := 0
	for i, h := range n {
		if h.zero() {
			continue
		}
		if last > 0 && h == n[last] { // Redis compares only after a neighbour
			continue
		}
		lo := h.align52()
		h.Bits++
		out = append(out, [2]uint64{lo, h.align52()})
		last = i
	}
	return out
}

// AppendGeoCoord formats a coordinate as Redis's human long double:
// "%.17Lf" without trailing zeros (an exact double prints the same as a
// long double), "-0" as "0".
func AppendGeoCoord(dst []byte, f float64) []byte {
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', 17, 64)
	end := len(dst)
	for end > start && dst[end-1] == '0' {
		end--
	}
	if end > start && dst[end-1] == '.' {
		end--
	}
	dst = dst[:end]
	if string(dst[start:]) == "-0" {
		dst = append(dst[:start], '0')
	}
	return dst
}

// AppendGeoDistance formats a distance as Redis's fixedpoint_d2string with
// four decimals: the value times 10^4 rounded half to even.
func AppendGeoDistance(dst []byte, d float64) []byte {
	if d == 0 {
		return append(dst, "0.0000"...)
	}
	v := math.RoundToEven(d * 10000)
	neg := v < 0
	if neg {
		v = -v
		dst = append(dst, '-')
	}
	u := uint64(v)
	digits := strconv.AppendUint(nil, u, 10)
	for len(digits) < 5 {
		digits = append([]byte{'0'}, digits...)
	}
	dst = append(dst, digits[:len(digits)-4]...)
	dst = append(dst, '.')
	return append(dst, digits[len(digits)-4:]...)
}
