package v1alpha1

import "testing"

func TestMQTTTopicMatches(t *testing.T) {
	cases := []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
		{"a/+/c", "a/b/c", true},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"a/#", "b/c", false},
		{"#", "a/b", true},
		{"+/+", "/b", true},
		{"#", "$SYS/broker", false},
		{"+/broker", "$SYS/broker", false},
		{"$SYS/#", "$SYS/broker", true},
		{"a/b/c", "a/b", false},
	}
	for _, tc := range cases {
		if got := MQTTTopicMatches(tc.filter, tc.topic); got != tc.want {
			t.Errorf("MQTTTopicMatches(%q, %q) = %v, want %v", tc.filter, tc.topic, got, tc.want)
		}
	}
}

// ValidateMQTT's messages, as `sless consume` shows them.
func TestValidateMQTT(t *testing.T) {
	ok := func() *MQTTSpec { return &MQTTSpec{ConnectionSecret: "mqtt", Topic: "sensors/+/temp"} }
	cases := []struct {
		name  string
		edit  func(*MQTTSpec)
		field string
	}{
		{"valid", func(*MQTTSpec) {}, ""},
		{"no topic", func(m *MQTTSpec) { m.Topic = "" }, "topic"},
		{"NUL in topic", func(m *MQTTSpec) { m.Topic = "a\x00b" }, "topic"},
		{"# inside", func(m *MQTTSpec) { m.Topic = "#/a" }, "topic"},
		{"shared filter", func(m *MQTTSpec) { m.Topic = "$share/g/a" }, "topic"},
		{"group with #", func(m *MQTTSpec) { m.ShareGroup = "g#" }, "shareGroup"},
		{"client id with /", func(m *MQTTSpec) { m.ClientID = "a/b" }, "clientID"},
		{"dead letters matched", func(m *MQTTSpec) { m.DeadLetterTopic = "sensors/x/temp" }, "deadLetterTopic"},
		{"dead letters with NUL", func(m *MQTTSpec) { m.DeadLetterTopic = "dead\x00" }, "deadLetterTopic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := ok()
			tc.edit(m)
			errs := ValidateMQTT(m)
			if tc.field == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Errorf("errors %v, want one on %s", errs.ToAggregate(), tc.field)
			}
		})
	}
}
