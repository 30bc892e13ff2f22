package handler

import (
	"context"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/rooms"
	"github.com/seckill/seckill/internal/stock"
)

// answeringRooms has a room on every item and answers every read.
type answeringRooms struct{}

func (answeringRooms) Roomed(int64) bool { return true }
func (answeringRooms) Admit(stock.OrderRequest, string) (rooms.Admission, error) {
	return nil, room.ErrPassMissing
}
func (answeringRooms) LearnUnproven(context.Context, int64) {}
func (answeringRooms) CreateItem(_ context.Context, in stock.NewItem, _ rooms.Change) (*stock.Item, error) {
	return &stock.Item{ID: 1, Name: in.Name, Stock: in.Stock, Strategy: in.Strategy, Buckets: in.Buckets}, nil
}
func (answeringRooms) Join(_ context.Context, v *stock.ItemView, _ string) (*rooms.Ticket, error) {
	return &rooms.Ticket{Ticket: "t", Number: 1, State: room.StateWaiting, Remaining: v.Remaining}, nil
}
func (r answeringRooms) Status(ctx context.Context, v *stock.ItemView, _ string) (*rooms.Ticket, error) {
	return r.Join(ctx, v, "")
}
func (answeringRooms) Draw(_ context.Context, id int64) (*rooms.Draw, error) {
	return &rooms.Draw{ItemID: id, PreQueue: []int64{}, Served: []int64{}}, nil
}
func (answeringRooms) Set(context.Context, int64, rooms.Change) error { return nil }
func (answeringRooms) Delete(context.Context, int64) error            { return nil }
func (answeringRooms) Admin(context.Context, *stock.Item) (*rooms.AdminView, error) {
	return &rooms.AdminView{Settings: rooms.Settings{AdmitPerSecond: 5, Phase: "open"}}, nil
}
func (answeringRooms) Public(int64, *time.Time) *rooms.Settings {
	return &rooms.Settings{AdmitPerSecond: 5, Phase: "open"}
}
