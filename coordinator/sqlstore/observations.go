package sqlstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// ObservationColumns are the columns ScanObservation reads, in its order
// (the dataset's columns, docs/dataset.md).
const ObservationColumns = `id, project, job_id, generation, owner, agent_id, phone_serial, phone_model, phone_sdk,
	phone_platform, phone_os_version, step, name, raw, value, parse, currency, tax, bounds, selector, app_package,
	app_version, app_version_code, locale, time_zone, observed_at, accepted_at, evidence, accepted, write_event_id`

// ScanObservation reads a stored observation (ObservationColumns).
func ScanObservation[T any](row Row, times Times[T]) (jobstore.ObservationRow, error) {
	var (
		o              jobstore.ObservationRow
		bounds         string
		evidence       []byte
		observed       *T
		acceptedAt     T
		phoneSDK, step int64
	)
	if err := row.Scan(&o.ID, &o.Project, &o.JobID, &o.Generation, &o.Owner, &o.AgentID, &o.PhoneSerial, &o.PhoneModel, &phoneSDK,
		&o.PhonePlatform, &o.PhoneOSVersion, &step, &o.Name, &o.Raw, &o.Value, &o.Parse, &o.Currency, &o.Tax, &bounds,
		&o.Selector, &o.AppPackage, &o.AppVersion, &o.AppCode, &o.Locale, &o.TimeZone, &observed, &acceptedAt, &evidence, &o.Accepted, &o.WriteEvent); err != nil {
		return jobstore.ObservationRow{}, err
	}
	o.PhoneSDK, o.Step = int(phoneSDK), int(step)
	var err error
	if o.Bounds, err = jobstore.ParseBounds(bounds); err != nil {
		return jobstore.ObservationRow{}, err
	}
	if string(evidence) == "[]" {
		o.Evidence = []jobstore.ObservationEvidence{}
	} else if err := json.Unmarshal(evidence, &o.Evidence); err != nil {
		return jobstore.ObservationRow{}, fmt.Errorf("decode evidence of observation %d: %w", o.ID, err)
	}
	if o.Evidence == nil {
		o.Evidence = []jobstore.ObservationEvidence{}
	}
	if o.ObservedAt, err = times.Null(observed); err != nil {
		return jobstore.ObservationRow{}, err
	}
	if o.AcceptedAt, err = times(acceptedAt); err != nil {
		return jobstore.ObservationRow{}, err
	}
	return o, nil
}

// ObservationQuery is the listing of jobstore.ObservationStore's
// ListObservations for f (checked with jobstore.CheckObservationFilter):
// only the conditions f sets, so that the planner sees each as it is, by
// id (descending with f.Desc). ph is the dialect's placeholder of the nth argument (from 1); at
// encodes a time argument; accepted is the condition that a row was
// accepted.
func ObservationQuery(f jobstore.ObservationFilter, ph func(n int) string, at func(time.Time) any, accepted string) (string, []any) {
	var (
		conds []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "?", ph(len(args))))
	}
	add("project = ?", f.Project)
	if !f.All {
		conds = append(conds, accepted)
	}
	if f.After > 0 {
		add("id > ?", f.After)
	}
	if f.Before > 0 {
		add("id < ?", f.Before)
	}
	if f.Name != "" {
		add("name = ?", f.Name)
	}
	if f.JobID != "" {
		add("job_id = ?", f.JobID)
	}
	if f.Phone != "" {
		add("phone_serial = ?", f.Phone)
	}
	if f.App != "" {
		add("app_package = ?", f.App)
	}
	if !f.Since.IsZero() {
		add("accepted_at >= ?", at(f.Since))
	}
	if !f.Until.IsZero() {
		add("accepted_at < ?", at(f.Until))
	}
	order := ` ORDER BY id`
	if f.Desc {
		order = ` ORDER BY id DESC`
	}
	args = append(args, f.Limit)
	return `SELECT ` + ObservationColumns + ` FROM observations WHERE ` + strings.Join(conds, " AND ") +
		order + ` LIMIT ` + ph(len(args)), args
}

// ObservationRecordsJSON is the JSON array of the records of a result that
// the stores insert from (jobstore.ObservationRecords).
func ObservationRecordsJSON(recs []jobstore.ObservationRecord) ([]byte, error) {
	b, err := json.Marshal(recs)
	if err != nil {
		return nil, fmt.Errorf("encode observations: %w", err)
	}
	return b, nil
}
