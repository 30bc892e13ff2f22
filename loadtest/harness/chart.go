package harness

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// WriteSVG writes a self-contained SVG chart: for each strategy, throughput
// (attempts/s, orders/s) and latency (p50, p99) over time, with the sell-out
// moment marked.
func (rep *Report) WriteSVG(w io.Writer) error {
	const width, panelH, gap, top = 900, 200, 60, 40
	n := len(rep.Strategies)
	height := top + n*(2*panelH+2*gap) + 20
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="15" font-weight="bold">seckill load test %s (%s loop, concurrency %d)</text>`+"\n",
		html.EscapeString(rep.Config.RunID), rep.Config.Mode, rep.Config.Concurrency)
	y := top
	for _, s := range rep.Strategies {
		secs := s.BucketWidth.Seconds()
		var att, ack, p50, p99 []float64
		for _, bk := range s.Timeline {
			att = append(att, float64(bk.Attempts)/secs)
			ack = append(ack, float64(bk.Acked)/secs)
			p50 = append(p50, float64(bk.P50)/float64(time.Millisecond))
			p99 = append(p99, float64(bk.P99)/float64(time.Millisecond))
		}
		span := time.Duration(len(s.Timeline)) * s.BucketWidth
		verdict := "PASS"
		if !s.Pass {
			verdict = "FAIL"
		}
		panel(&b, 60, y+gap/2, width-80, panelH, span, s.SellOutAt,
			fmt.Sprintf("strategy %s: throughput (req/s)  [%s]", s.Strategy, verdict),
			[]series{{"attempts/s", "#1f77b4", att}, {"orders/s", "#2ca02c", ack}})
		y += panelH + gap
		panel(&b, 60, y+gap/2, width-80, panelH, span, s.SellOutAt,
			fmt.Sprintf("strategy %s: latency (ms)", s.Strategy),
			[]series{{"p50", "#ff7f0e", p50}, {"p99", "#d62728", p99}})
		y += panelH + gap
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

type series struct {
	name, color string
	v           []float64
}

func panel(b *bytes.Buffer, x, y, w, h int, span, sellOut time.Duration, title string, ss []series) {
	maxV := 0.0
	for _, s := range ss {
		for _, v := range s.v {
			maxV = max(maxV, v)
		}
	}
	if maxV == 0 {
		maxV = 1
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x, y-8, html.EscapeString(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", x, y, w, h)
	for i := 0; i <= 4; i++ {
		yy := y + h - i*h/4
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#eee"/><text x="%d" y="%d" text-anchor="end">%s</text>`+"\n",
			x, yy, x+w, yy, x-4, yy+4, compact(maxV*float64(i)/4))
	}
	secs := span.Seconds()
	for i := 0; i <= 5; i++ {
		xx := x + i*w/5
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%.1fs</text>`+"\n", xx, y+h+14, secs*float64(i)/5)
	}
	for si, s := range ss {
		if len(s.v) == 0 {
			continue
		}
		var pts []string
		for i, v := range s.v {
			// points at the middle of their bucket
			px := float64(x) + (float64(i)+0.5)/float64(len(s.v))*float64(w)
			py := float64(y+h) - v/maxV*float64(h)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
		lx := x + w - 120
		ly := y + 14 + si*14
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n",
			lx, ly-4, lx+16, ly-4, s.color, lx+20, ly, html.EscapeString(s.name))
	}
	if sellOut >= 0 && secs > 0 {
		sx := x + int(sellOut.Seconds()/secs*float64(w))
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black" stroke-dasharray="5,4"/><text x="%d" y="%d">sold out %.2fs</text>`+"\n",
			sx, y, sx, y+h, sx+4, y+h-6, sellOut.Seconds())
	}
}

func compact(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

// WriteHTML writes a self-contained page with the chart and the text report.
func (rep *Report) WriteHTML(w io.Writer) error {
	var svg, txt bytes.Buffer
	if err := rep.WriteSVG(&svg); err != nil {
		return err
	}
	rep.WriteText(&txt)
	_, err := fmt.Fprintf(w, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>seckill load test %s</title></head>\n<body>\n%s<pre>%s</pre>\n</body></html>\n",
		html.EscapeString(rep.Config.RunID), svg.String(), html.EscapeString(txt.String()))
	return err
}
