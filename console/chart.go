package console

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"time"
)

// chart is a small SVG chart over the minutes of the last hour: stacked bars (one
// per series and minute) or lines, drawn on the server, so that a page shows it with
// JavaScript off and under a CSP that allows no script. Each bar or point has a
// <title>, the browser's tooltip; the page gives the numbers in a table too.
type chart struct {
	Label   string      // what it shows, for its accessible name
	Minutes []time.Time // the x axis: one slot per minute, oldest first
	Series  []series
	Stacked bool // bars stacked per minute; else lines
	Log     bool // a logarithmic y axis (lines of durations)
	Unit    func(float64) string
}

// series is one named row of values, one per minute; NaN: none that minute.
type series struct {
	Name   string
	Class  string // the CSS class that colours it
	Values []float64
}

// Chart geometry, in the SVG's user units.
const (
	chartW, chartH         = 720.0, 200.0
	padL, padR, padT, padB = 56.0, 8.0, 8.0, 22.0
)

// SVG renders the chart. Every text in it is escaped.
func (c chart) SVG() template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s" preserveAspectRatio="none">`,
		chartW, chartH, html.EscapeString(c.Label))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(c.Label))
	n := len(c.Minutes)
	if n == 0 {
		b.WriteString(`</svg>`)
		return template.HTML(b.String())
	}
	top := 0.0
	low := math.Inf(1)
	for i := range n {
		sum := 0.0
		for _, s := range c.Series {
			v := s.Values[i]
			if math.IsNaN(v) {
				continue
			}
			if c.Stacked {
				sum += v
			} else {
				top = max(top, v)
				if v > 0 {
					low = min(low, v)
				}
			}
		}
		top = max(top, sum)
	}
	if top <= 0 {
		top = 1
	}
	switch {
	case !c.Log || math.IsInf(low, 1):
		low = 0
	case low >= top/10: // a decade at least, so that one value is not both ends
		low = top / 10
	}
	y := func(v float64) float64 {
		h := chartH - padT - padB
		if c.Log {
			lo, hi := math.Log10(max(low, 0.001)), math.Log10(top*1.2)
			if v <= 0 {
				return chartH - padB
			}
			return chartH - padB - h*(math.Log10(v)-lo)/(hi-lo)
		}
		return chartH - padB - h*v/(top*1.1)
	}
	step := (chartW - padL - padR) / float64(n)
	// Axis: the top value and the bottom, and the first and last minutes.
	fmt.Fprintf(&b, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, padL, chartH-padB, chartW-padR, chartH-padB)
	topV := top
	if !c.Log {
		topV = top * 1.1
	}
	fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, padL-4, padT+10, html.EscapeString(c.Unit(topV)))
	fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, padL-4, chartH-padB, html.EscapeString(c.Unit(low)))
	fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f">%s</text>`, padL, chartH-6, c.Minutes[0].UTC().Format("15:04"))
	fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, chartW-padR, chartH-6, c.Minutes[n-1].UTC().Format("15:04Z"))
	if c.Stacked {
		for i := range n {
			base := 0.0
			for _, s := range c.Series {
				v := s.Values[i]
				if math.IsNaN(v) || v <= 0 {
					continue
				}
				y0, y1 := y(base), y(base+v)
				fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s %s: %s</title></rect>`,
					html.EscapeString(s.Class), padL+float64(i)*step+step*0.1, y1, step*0.8, y0-y1,
					c.Minutes[i].UTC().Format("15:04"), html.EscapeString(s.Name), html.EscapeString(c.Unit(v)))
				base += v
			}
		}
	} else {
		for _, s := range c.Series {
			var pts []string
			for i, v := range s.Values {
				if math.IsNaN(v) {
					continue
				}
				x := padL + float64(i)*step + step/2
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y(v)))
				fmt.Fprintf(&b, `<circle class="%s" cx="%.1f" cy="%.1f" r="2.5"><title>%s %s: %s</title></circle>`,
					html.EscapeString(s.Class), x, y(v), c.Minutes[i].UTC().Format("15:04"), html.EscapeString(s.Name), html.EscapeString(c.Unit(v)))
			}
			if len(pts) > 1 {
				fmt.Fprintf(&b, `<polyline class="%s" fill="none" points="%s"/>`, html.EscapeString(s.Class), strings.Join(pts, " "))
			}
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
