package agent

import (
	"errors"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/uploader"
)

// classify maps the error that ended a job to the class and cause its
// fail carries (docs/protocol.md section 6.8, Failure classes and causes).
// The error is classified where it happened: capture and uploader return
// sentinel errors (wrapped), matched here with errors.Is, never by their
// text. What is not the phone's, the adb server's or the storage's fault
// is the job's own: an invalid step, an app not installed, a check that
// did not hold, and any other step error (step_failed).
func classify(err error) (class, cause string) {
	var nd *needsDecisionError
	switch {
	case errors.As(err, &nd):
		// An effect step in doubt: not the phone's fault, and not to be
		// retried until a person decides (docs/effects.md).
		return protocol.FailClassJob, protocol.CauseNeedsDecision
	case errors.Is(err, capture.ErrADBServerGone):
		return protocol.FailClassInfrastructure, protocol.CauseAdbServerGone
	case errors.Is(err, capture.ErrUnplugged), errors.Is(err, capture.ErrUnauthorized), errors.Is(err, capture.ErrNoDevice),
		errors.Is(err, capture.ErrNotAnswering):
		// The phone left adb, went offline or is no longer usable: the
		// job may run on another one.
		return protocol.FailClassInfrastructure, protocol.CausePhoneUnplugged
	case errors.Is(err, uploader.ErrUnavailable):
		return protocol.FailClassInfrastructure, protocol.CauseStorageUnreachable
	case errors.Is(err, capture.ErrAppNotInstalled):
		return protocol.FailClassJob, protocol.CauseAppNotInstalled
	case errors.Is(err, capture.ErrAssertion):
		return protocol.FailClassJob, protocol.CauseAssertion
	case errors.Is(err, capture.ErrElementNotFound):
		return protocol.FailClassJob, protocol.CauseElementNotFound
	case errors.Is(err, capture.ErrExtract):
		return protocol.FailClassJob, protocol.CauseExtractFailed
	case errors.Is(err, capture.ErrAPKDownload):
		// The bucket or the network: another attempt may get it whole.
		return protocol.FailClassInfrastructure, protocol.CauseAPKDownload
	case errors.Is(err, capture.ErrInstall):
		return protocol.FailClassJob, protocol.CauseInstallFailed
	case errors.Is(err, capture.ErrInvalidStep):
		return protocol.FailClassJob, protocol.CauseInvalidStep
	}
	return protocol.FailClassJob, protocol.CauseStepFailed
}
