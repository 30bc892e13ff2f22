package app

import "github.com/seckill/seckill/internal/stock/shop"

// Service is the App's domain service, for the tests of package app_test.
func (a *App) Service() *shop.Service { return a.service }

// StartWorker is what `seckill worker` runs, for the tests of package
// app_test: it returns once the writers run, and closeAll stops them.
var StartWorker = startWorker
