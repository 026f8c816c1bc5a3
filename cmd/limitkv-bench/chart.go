package main

import (
	"fmt"
	"html"
	"strings"
)

// chart draws results.svg by hand: horizontal bars of median throughput
// per workload, both servers at every depth on one linear scale, then
// memory per key per shape, each shape on its own scale (a fixed-window
// key and a 100-entry window differ fifty-fold).

const (
	chartWidth  = 1060
	chartLabelW = 230 // workload names left of the bars
	chartBarMax = 560 // the longest bar
	chartBarH   = 14
	chartBarGap = 3
	chartGroup  = 14 // between workloads
)

var serverColor = map[string]string{kindLimitkv: "#1f6fb4", kindRedis: "#c8352b"}

// depthOpacity fades the deeper pipelines' bars so depths tell apart.
func depthOpacity(i int) float64 { return max(0.35, 1-0.45*float64(i)) }

func chart(r *results) string {
	var body strings.Builder
	y := 20
	text := func(x, y int, anchor, weight string, size int, s string) {
		fmt.Fprintf(&body, `<text x="%d" y="%d" text-anchor="%s" font-weight="%s" font-size="%d">%s</text>`+"\n", x, y, anchor, weight, size, html.EscapeString(s))
	}
	bar := func(y int, length float64, color string, opacity float64, label string) {
		w := max(1, int(length+0.5))
		fmt.Fprintf(&body, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" fill-opacity="%.2f"/>`+"\n", chartLabelW, y, w, chartBarH, color, opacity)
		// A label that would run off the chart goes inside its bar's end.
		if chartLabelW+w+5+labelWidth(label) > chartWidth {
			fmt.Fprintf(&body, `<text x="%d" y="%d" text-anchor="end" font-size="11">%s</text>`+"\n",
				chartLabelW+w-4, y+chartBarH-3, html.EscapeString(label))
			return
		}
		text(chartLabelW+w+5, y+chartBarH-3, "start", "normal", 11, label)
	}
	legend := func(y int, items [][3]string) { // color, opacity, label
		x := chartLabelW
		for _, it := range items {
			fmt.Fprintf(&body, `<rect x="%d" y="%d" width="12" height="12" fill="%s" fill-opacity="%s"/>`+"\n", x, y-10, it[0], it[1])
			text(x+16, y, "start", "normal", 11, it[2])
			x += 22 + 7*len(it[2])
		}
	}

	if len(r.Throughput) > 0 {
		text(10, y+4, "start", "bold", 15, "Go load generator: median ops/s over the rounds (higher is better), server CPU µs per op")
		y += 22
		depths := r.Meta.Depths
		var items [][3]string
		for i, d := range depths {
			for _, kind := range []string{kindLimitkv, kindRedis} {
				items = append(items, [3]string{serverColor[kind], fmt.Sprintf("%.2f", depthOpacity(i)), fmt.Sprintf("%s, depth %d", kind, d)})
			}
		}
		legend(y, items)
		y += 14
		top := 0.0
		for _, row := range r.Throughput {
			top = max(top, row.Limitkv.OpsPerSec, row.Redis.OpsPerSec)
		}
		var order []string
		byWorkload := map[string][]rowSummary{}
		names := map[string]string{}
		for _, row := range r.Throughput {
			if byWorkload[row.Workload] == nil {
				order = append(order, row.Workload)
			}
			byWorkload[row.Workload] = append(byWorkload[row.Workload], row)
			names[row.Workload] = row.Name
		}
		for _, w := range order {
			rows := byWorkload[w]
			groupH := len(rows)*2*(chartBarH+chartBarGap) - chartBarGap
			text(chartLabelW-8, y+groupH/2+4, "end", "normal", 12, names[w])
			for _, row := range rows {
				di := 0
				for i, d := range depths {
					if d == row.Depth {
						di = i
					}
				}
				for _, s := range []*serverSummary{row.Limitkv, row.Redis} {
					label := fmt.Sprintf("%s  · %.2f µs CPU/op", commas(s.OpsPerSec), s.CPUPerOpUs)
					if s == row.Limitkv {
						label += fmt.Sprintf("  (%.2fx Redis)", row.Ratio)
					}
					if s.Errors > 0 {
						label += "  INVALID: error replies"
					}
					bar(y, s.OpsPerSec/top*chartBarMax, serverColor[s.Server], depthOpacity(di), label)
					y += chartBarH + chartBarGap
				}
			}
			y += chartGroup
		}
		y += 16
	}

	if r.RB != nil && len(r.RB.Rows) > 0 {
		y = chartRB(&body, y, r, text, bar, legend)
	}

	if len(r.Memory) > 0 {
		text(10, y+4, "start", "bold", 15, "Memory per key: used_memory growth / keys (lower is better; each shape on its own scale)")
		y += 22
		legend(y, [][3]string{{serverColor[kindLimitkv], "1", "limitkv"}, {serverColor[kindRedis], "1", "redis"}})
		y += 14
		for _, m := range r.Memory {
			groupH := 2*(chartBarH+chartBarGap) - chartBarGap
			text(chartLabelW-8, y+groupH/2+4, "end", "normal", 12, m.Name)
			top := max(m.Limitkv.UsedPerKey, m.Redis.UsedPerKey, 1)
			for _, x := range []struct {
				kind string
				rd   memReading
			}{{kindLimitkv, m.Limitkv}, {kindRedis, m.Redis}} {
				bar(y, x.rd.UsedPerKey/top*chartBarMax, serverColor[x.kind], 1,
					fmt.Sprintf("%.0f B  (RSS %.0f B)", x.rd.UsedPerKey, x.rd.RSSPerKey))
				y += chartBarH + chartBarGap
			}
			y += chartGroup
		}
		y += 6
	}
	if r.Snapshot != nil {
		// The target is judged at the fixed rate when there is one.
		sn := &r.Snapshot.snapshotLoad
		if r.Snapshot.Paced != nil {
			sn = r.Snapshot.Paced
		}
		text(10, y+4, "start", "bold", 15, "p99 latency, depth 1, "+offeredLoad(sn.Rate)+", while a snapshot of the dirty keys runs (target < 2 ms)")
		y += 22
		legend(y, [][3]string{{"#7f7f7f", "1", "without snapshot"}, {"#e08a1e", "1", "during the snapshot"}})
		y += 14
		top := 2000.0
		for _, name := range []string{snapGet, snapSlide} {
			top = max(top, sn.Baseline[name].P99us, sn.During[name].P99us)
		}
		scale := chartBarMax / top
		groupTop := y
		for _, name := range []string{snapGet, snapSlide} {
			text(chartLabelW-8, y+chartBarH+4, "end", "normal", 12, "limitkv "+name)
			bar(y, sn.Baseline[name].P99us*scale, "#7f7f7f", 1, fmt.Sprintf("%.0f µs", sn.Baseline[name].P99us))
			y += chartBarH + chartBarGap
			bar(y, sn.During[name].P99us*scale, "#e08a1e", 1, fmt.Sprintf("%.0f µs", sn.During[name].P99us))
			y += chartBarH + chartBarGap + chartGroup
		}
		x := chartLabelW + int(2000*scale+0.5)
		fmt.Fprintf(&body, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black" stroke-dasharray="4 3"/>`+"\n", x, groupTop-4, x, y-chartGroup)
		text(x+4, y-chartGroup+10, "start", "normal", 10, "2 ms")
		y += 16
	}
	text(10, y+8, "start", "normal", 10, fmt.Sprintf("limitkv-bench, %s, %s, %d cores. See results.md for latencies, conditions and targets.",
		r.Meta.Started.Format("2006-01-02"), r.Meta.CPU, r.Meta.Cores))
	y += 20

	var out strings.Builder
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif">`+"\n", chartWidth, y, chartWidth, y)
	fmt.Fprintf(&out, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartWidth, y)
	out.WriteString(body.String())
	out.WriteString("</svg>\n")
	return out.String()
}

// incrColor marks Redis's INCR, the reference of a rate limit's cost.
const incrColor = "#7f7f7f"

// chartRB draws the redis-benchmark runs: the median requests/s of both
// servers at every depth, then the server's CPU per request on its own
// scale, with Redis's INCR beside the rate limits.
func chartRB(body *strings.Builder, y int, r *results, text func(x, y int, anchor, weight string, size int, s string),
	bar func(y int, length float64, color string, opacity float64, label string), legend func(y int, items [][3]string)) int {
	rows := r.RB.Rows
	depths := r.Meta.Depths
	depthIndex := func(d int) int {
		for i, x := range depths {
			if x == d {
				return i
			}
		}
		return 0
	}
	var items [][3]string
	for i, d := range depths {
		for _, kind := range []string{kindLimitkv, kindRedis} {
			items = append(items, [3]string{serverColor[kind], fmt.Sprintf("%.2f", depthOpacity(i)), fmt.Sprintf("%s, depth %d", kind, d)})
		}
	}
	var order []string
	byWorkload := map[string][]rbRow{}
	names := map[string]string{}
	for _, row := range rows {
		if byWorkload[row.Workload] == nil {
			order = append(order, row.Workload)
		}
		byWorkload[row.Workload] = append(byWorkload[row.Workload], row)
		names[row.Workload] = row.Name
	}
	incr := map[int]float64{}
	for _, row := range rows {
		if row.Workload == "incr" {
			incr[row.Depth] = row.Redis.CPUPerReqUs
		}
	}

	text(10, y+4, "start", "bold", 15, "redis-benchmark: median requests/s over the rounds (higher is better; Redis runs the Lua scripts)")
	y += 22
	legend(y, items)
	y += 14
	top := 0.0
	for _, row := range rows {
		top = max(top, row.Limitkv.OpsPerSec, row.Redis.OpsPerSec)
	}
	for _, w := range order {
		group := byWorkload[w]
		groupH := len(group)*2*(chartBarH+chartBarGap) - chartBarGap
		text(chartLabelW-8, y+groupH/2+4, "end", "normal", 12, names[w])
		for _, row := range group {
			for _, s := range []*rbSummary{row.Limitkv, row.Redis} {
				label := commas(s.OpsPerSec)
				if s == row.Limitkv {
					label += fmt.Sprintf("  (%.2fx Redis)", row.Ratio)
				}
				bar(y, div(s.OpsPerSec, top)*chartBarMax, serverColor[s.Server], depthOpacity(depthIndex(row.Depth)), label)
				y += chartBarH + chartBarGap
			}
		}
		y += chartGroup
	}
	y += 16

	text(10, y+4, "start", "bold", 15, "redis-benchmark: server CPU µs per request, median (lower is better)")
	y += 22
	legend(y, append(items, [3]string{incrColor, "1", "Redis INCR"}))
	y += 14
	top = 0
	for _, row := range rows {
		top = max(top, row.Limitkv.CPUPerReqUs, row.Redis.CPUPerReqUs)
	}
	for _, w := range order {
		group := byWorkload[w]
		bars := 0
		for _, row := range group {
			bars += 2
			if incr[row.Depth] > 0 && row.CPUOverINCR > 0 {
				bars++
			}
		}
		groupH := bars*(chartBarH+chartBarGap) - chartBarGap
		text(chartLabelW-8, y+groupH/2+4, "end", "normal", 12, names[w])
		for _, row := range group {
			op := depthOpacity(depthIndex(row.Depth))
			for _, s := range []*rbSummary{row.Limitkv, row.Redis} {
				label := fmt.Sprintf("%.2f µs", s.CPUPerReqUs)
				if s == row.Limitkv {
					label += fmt.Sprintf("  (%.2fx Redis", row.CPURatio)
					if row.CPUOverINCR > 0 {
						label += fmt.Sprintf(", %.2fx Redis INCR", row.CPUOverINCR)
					}
					label += ")"
				}
				bar(y, div(s.CPUPerReqUs, top)*chartBarMax, serverColor[s.Server], op, label)
				y += chartBarH + chartBarGap
			}
			if v := incr[row.Depth]; v > 0 && row.CPUOverINCR > 0 {
				bar(y, div(v, top)*chartBarMax, incrColor, op, fmt.Sprintf("%.2f µs  (Redis INCR, depth %d)", v, row.Depth))
				y += chartBarH + chartBarGap
			}
		}
		y += chartGroup
	}
	return y + 16
}

// labelWidth guesses a label's width in pixels at font size 11.
func labelWidth(s string) int { return len([]rune(s)) * 6 }
