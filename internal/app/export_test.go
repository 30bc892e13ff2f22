package app

import "github.com/seckill/seckill/internal/stock/shop"

// Service is the App's domain service, for the tests of package app_test.
func (a *App) Service() *shop.Service { return a.service }
