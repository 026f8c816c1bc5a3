package config

import "testing"

func TestPercentilesSetting(t *testing.T) {
	for _, c := range []struct{ in, out, err string }{
		{"50 99 99.9", "50 99 99.9", ""},
		{"0.0 50.000 1e1 12.3456789", "0 50 10 12.345679", ""},
		{"", "", ""},
		{"50  99", "", "Invalid latency-tracking-info-percentiles parameters"},
		{"a", "", "Invalid latency-tracking-info-percentiles parameters"},
		{"NaN", "", "Invalid latency-tracking-info-percentiles parameters"},
		{"101", "", "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"},
		{"-0.5", "", "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"},
	} {
		p, err := ParsePercentiles(c.in)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || formatPercentiles(p) != c.out {
			t.Errorf("%q: %q %v, want %q", c.in, formatPercentiles(p), err, c.out)
		}
	}
}
