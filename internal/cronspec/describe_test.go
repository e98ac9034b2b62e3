package cronspec

import "testing"

func TestDescribe(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"30 2 * * *", "at 02:30 every day"},
		{"*/5 * * * *", "every 5 minutes"},
		{"0 9 * * mon-fri", "at 09:00 on Monday through Friday"},
		{"@every 30s", "every 30s"},
		{"@every 2m", "every 2m"},
		{"@every 1h30m", "every 1h30m"},
		{"@every 90s", "every 1m30s"},
		{"@every 24h", "every 24h"},
		{"* * * * *", "every minute"},
		{"* * * * * *", "every second"},
		{"*/10 * * * * *", "every 10 seconds"},
		{"30 * * * * *", "at second 30"},
		{"0,30 * * * * *", "every 30 seconds"},
		{"0,20 * * * * *", "at seconds 0 and 20"},
		{"0 * * * *", "every hour"},
		{"@hourly", "every hour"},
		{"30 * * * *", "every hour at minute 30"},
		{"0 */2 * * *", "every 2 hours"},
		{"30 */6 * * *", "at 00:30, 06:30, 12:30 and 18:30 every day"},
		{"30 */2 * * *", "every 2 hours at minute 30"},
		{"0,30 * * * *", "every 30 minutes"},
		{"15,45 * * * *", "at minutes 15 and 45"},
		{"*/15 9-17 * * *", "every 15 minutes, from 09:00 to 17:59"},
		{"*/15 9-17 * * mon-fri", "every 15 minutes, from 09:00 to 17:59 on Monday through Friday"},
		{"0 9,17 * * *", "at 09:00 and 17:00 every day"},
		{"0 8,12,18 * * *", "at 08:00, 12:00 and 18:00 every day"},
		{"0 0,6,12,18,21 * * *", "every hour, in hours 00, 06, 12, 18 and 21"},
		{"5 4 * * sun", "at 04:05 on Sunday"},
		{"0 0 * * 1,3,5", "at 00:00 on Monday, Wednesday and Friday"},
		{"0 0 * * sat,sun", "at 00:00 on Sunday and Saturday"},
		{"@daily", "at 00:00 every day"},
		{"@midnight", "at 00:00 every day"},
		{"@weekly", "at 00:00 on Sunday"},
		{"@monthly", "at 00:00 on day 1 of the month"},
		{"@yearly", "at 00:00 on January 1"},
		{"@annually", "at 00:00 on January 1"},
		{"0 12 1,15 * *", "at 12:00 on days 1 and 15 of the month"},
		{"0 12 1-7 * *", "at 12:00 on days 1 through 7 of the month"},
		{"0 0 13 * fri", "at 00:00 on day 13 of the month or on Friday"},
		{"0 6 * 1-3 *", "at 06:00 in January through March"},
		{"0 6 * jan,jul *", "at 06:00 in January and July"},
		{"0 0 1 */3 *", "at 00:00 on day 1 of the month every 3 months from January"},
		{"0 0 25 12 *", "at 00:00 on December 25"},
		{"15 30 2 * * *", "at 02:30:15 every day"},
		{"0 0 */2 * * *", "every 2 hours"},
		{"0 */20 * * * *", "every 20 minutes"},
		{"*/20 * * * * *", "every 20 seconds"},
		{"10 */5 * * * *", "at second 10, of every 5 minutes"},
		{"0 0-5 * * *", "every hour, from 00:00 to 05:59"},
		{"*/7 * * * *", "at minutes 0, 7, 14, 21, 28, 35, 42, 49 and 56"},
		{"0 0 * * */2", "at 00:00 on Sunday, Tuesday, Thursday and Saturday"},
		{"0 22 * * 1-5", "at 22:00 on Monday through Friday"},
		{"23 0-20/2 * * *", "every hour at minute 23, in hours 00, 02, 04, 06, 08, 10, 12, 14, 16, 18 and 20"},
		{"0 */5 * * *", "every hour, in hours 00, 05, 10, 15 and 20"},
		{"0 0 1 1,4,7,10 *", "at 00:00 on day 1 of the month every 3 months from January"},
	} {
		s, err := Parse(tc.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.spec, err)
			continue
		}
		if got := s.Describe(); got != tc.want {
			t.Errorf("Describe(%q) = %q, want %q", tc.spec, got, tc.want)
		}
	}
	if got := (Spec{}).Describe(); got != "" {
		t.Errorf("Describe of the zero Spec = %q, want empty", got)
	}
}
