package engine

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestGeoAgainstRedis checks scores, decoded coordinates, geohash strings
// and distances against values redis-server 7.0.15 gave for the same
// points (testdata/geo_redis.txt): scores, coordinates and hashes must be
// identical; distances identical in GEODIST's four decimals, and the
// stored (STOREDIST) doubles identical for all but a rare last bit, where
// glibc's sin and cos are not correctly rounded and these are.
func TestGeoAgainstRedis(t *testing.T) {
	f, err := os.Open("testdata/geo_redis.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	points, dists, lastBit := 0, 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fs := strings.Fields(line)
		switch fs[0] {
		case "point":
			points++
			score, ok := GeoScore(num(fs[1]), num(fs[2]))
			if !ok || strconv.FormatUint(score, 10) != fs[3] {
				t.Errorf("%s: score %d, Redis %s", line, score, fs[3])
				continue
			}
			lon, lat := GeoDecodeScore(float64(score))
			if g := string(AppendGeoCoord(nil, lon)); g != fs[4] {
				t.Errorf("%s: longitude %s", line, g)
			}
			if g := string(AppendGeoCoord(nil, lat)); g != fs[5] {
				t.Errorf("%s: latitude %s", line, g)
			}
			if g := string(GeoHashString(float64(score))); g != fs[6] {
				t.Errorf("%s: geohash %s", line, g)
			}
		case "dist":
			dists++
			s1, _ := GeoScore(num(fs[1]), num(fs[2]))
			s2, _ := GeoScore(num(fs[3]), num(fs[4]))
			lon1, lat1 := GeoDecodeScore(float64(s1))
			lon2, lat2 := GeoDecodeScore(float64(s2))
			d := GeoDistance(lon1, lat1, lon2, lat2)
			if g := string(AppendGeoDistance(nil, d)); g != fs[5] {
				t.Errorf("%s: distance %s", line, g)
			}
			if g := strconv.FormatFloat(d/1000, 'g', 17, 64); g != fs[6] {
				if num(g) != num(fs[6]) {
					lastBit++
					t.Logf("%s: stored distance %s", line, g)
				}
			}
		}
	}
	if points < 100 || dists < 100 {
		t.Fatalf("only %d points and %d distances", points, dists)
	}
	if lastBit > dists/50 {
		t.Errorf("%d of %d stored distances differ from Redis's", lastBit, dists)
	}
}

func TestGeoFormats(t *testing.T) {
	for _, c := range []struct {
		f          float64
		coord, dst string
	}{
		{0, "0", "0.0000"},
		{1.5, "1.5", "1.5000"},
		{-0.00001, "-0.00001", "0.0000"},                       // llrint(-0.1) is 0,
		{12345.67895, "12345.67894999999953143", "12345.6790"}, // times 10^4 is 123456789.5: half to even,
		{0.00005, "0.00005", "0.0000"},
		{0.00015, "0.00015", "0.0001"}, // 0.00015*10^4 is 1.4999999999999998,
	} {
		if g := string(AppendGeoCoord(nil, c.f)); g != c.coord {
			t.Errorf("coord %v: %s, want %s", c.f, g, c.coord)
		}
		if g := string(AppendGeoDistance(nil, c.f)); g != c.dst {
			t.Errorf("distance %v: %s, want %s", c.f, g, c.dst)
		}
	}
}

// BenchmarkGeoDistance measures the haversine in double-double (what
// searches and GEODIST pay per point) against Go's math library.
func BenchmarkGeoDistance(b *testing.B) {
	b.Run("double-double", func(b *testing.B) {
		var sum float64
		for i := 0; i < b.N; i++ {
			sum += GeoDistance(13.361389, 38.115556, 15.087269+float64(i&7)*1e-3, 37.502669)
		}
		_ = sum
	})
	b.Run("math", func(b *testing.B) {
		var sum float64
		for i := 0; i < b.N; i++ {
			lon2 := 15.087269 + float64(i&7)*1e-3
			v := math.Sin((degRad(lon2) - degRad(13.361389)) / 2)
			u := math.Sin((degRad(37.502669) - degRad(38.115556)) / 2)
			a := u*u + math.Cos(degRad(38.115556))*math.Cos(degRad(37.502669))*v*v
			sum += 2 * earthRadius * math.Asin(math.Sqrt(a))
		}
		_ = sum
	})
}
