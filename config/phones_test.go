package config

import (
	"testing"
	"time"
)

func TestPhonesConfig(t *testing.T) {
	base := "agent_id: a\nnats:\n  url: nats://h:4222\nstorage:\n  mode: presigned\n"
	a, err := ParseAgent("agent.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if p := a.Phones; p.FactsInterval.Duration() != 5*time.Minute || p.Rest.MaxTempC != 45 || p.Rest.MinBattery != 15 ||
		p.Rest.ResumeTempC != 40 || p.Rest.ResumeBattery != 30 || p.Rest.ChargeHook != nil || p.Rest.ChargeHookTimeout.Duration() != 30*time.Second {
		t.Errorf("defaults: %+v", p)
	}
	a, err = ParseAgent("agent.yaml", []byte(base+"phones:\n  facts_interval: 30s\n  rest:\n    max_temp_c: 41.5\n    resume_temp_c: 38\n    min_battery: 20\n    resume_battery: 50\n    charge_hook: [/usr/local/bin/plug, \"{serial}\", \"{event}\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := a.Phones; p.FactsInterval.Duration() != 30*time.Second || p.Rest.MaxTempC != 41.5 || p.Rest.ResumeTempC != 38 ||
		p.Rest.MinBattery != 20 || p.Rest.ResumeBattery != 50 || len(p.Rest.ChargeHook) != 3 || p.Rest.ChargeHook[1] != "{serial}" {
		t.Errorf("set: %+v", p)
	}
	_, err = ParseAgent("agent.yaml", []byte(base+"phones:\n  facts_interval: 10ms\n  rest:\n    max_temp_c: hot\n    min_battery: 40\n    resume_battery: 20\n    resume_temp_c: 300\n    charge_hook: [\"\"]\n    bogus: 1\n"))
	checkProblems(t, err, []string{
		"agent.yaml:7:19: phones.facts_interval: must be at least 1s, got 10ms",
		`agent.yaml:9:17: phones.rest.max_temp_c: expected a number, got a string "hot"`,
		"agent.yaml:11:21: phones.rest.resume_battery: must not be under min_battery (40), got 20",
		"agent.yaml:12:20: phones.rest.resume_temp_c: must be a temperature from 0 (off) to 150 °C, got 300",
		"agent.yaml:13:19: phones.rest.charge_hook[0]: the command must not be empty",
		`agent.yaml:14:5: phones.rest: unknown field "bogus"`,
	})
	_, err = ParseAgent("agent.yaml", []byte(base+"phones:\n  facts_interval: 10ms\n  rest:\n    max_temp_c: 40\n    min_battery: 40\n    resume_battery: 20\n    resume_temp_c: 42\n    charge_hook: [\"\"]\n"))
	checkProblems(t, err, []string{
		"agent.yaml:7:19: phones.facts_interval: must be at least 1s, got 10ms",
		"agent.yaml:11:21: phones.rest.resume_battery: must not be under min_battery (40), got 20",
		"agent.yaml:12:20: phones.rest.resume_temp_c: must not be above max_temp_c (40), got 42",
		"agent.yaml:13:19: phones.rest.charge_hook[0]: the command must not be empty",
	})
}
