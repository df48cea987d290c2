package relay

import (
	"github.com/nats-io/nats.go"
)

// ackedPublisher is a Publisher that reports each publish's outcome to a handler instead of
// a future, so that the pipeline waits for its acknowledgements without a goroutine per
// publish. AckPublisher is one.
type ackedPublisher interface {
	PublishAcked(msg *nats.Msg, h AckHandler) error
}

// ackedOf returns pub as an ackedPublisher: itself when it is one, else futureAcks.
func ackedOf(pub Publisher) ackedPublisher {
	if a, ok := pub.(ackedPublisher); ok {
		return a
	}
	return futureAcks{pub}
}

// futureAcks adapts a Publisher that returns futures (jetstream.JetStream, test fakes): a
// goroutine per publish waits for its future and tells the handler.
type futureAcks struct{ pub Publisher }

func (f futureAcks) PublishAcked(msg *nats.Msg, h AckHandler) error {
	fut, err := f.pub.PublishMsgAsync(msg)
	if err != nil {
		return err
	}
	go func() {
		select {
		case ack := <-fut.Ok():
			h.Acked(ack, nil)
		case err := <-fut.Err():
			h.Acked(nil, err)
		}
	}()
	return nil
}
