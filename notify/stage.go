package notify

import "context"

// Stage is one step of delivery. It reads and fills in the Delivery; it returns an error only
// when the delivery could not be processed (the log is unreachable, the process is stopping),
// in which case it is not settled and must be offered again. A failure to deliver is not an
// error: it is recorded in the Delivery and settled.
type Stage interface {
	Exec(ctx context.Context, d *Delivery) error
}

// StageFunc adapts a function to a Stage.
type StageFunc func(ctx context.Context, d *Delivery) error

// Exec calls f.
func (f StageFunc) Exec(ctx context.Context, d *Delivery) error { return f(ctx, d) }

// MultiStage runs its stages in order, stopping at the first error or once a stage settled
// the delivery (dedup found it already settled).
type MultiStage []Stage

// Exec runs the stages.
func (ms MultiStage) Exec(ctx context.Context, d *Delivery) error {
	for _, s := range ms {
		if d.Status != StatusPending {
			return nil
		}
		if err := s.Exec(ctx, d); err != nil {
			return err
		}
	}
	return nil
}
