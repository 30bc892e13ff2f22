package app

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Payments from the provider: the webhook's settings
// (SECKILL_STRIPE_WEBHOOK_SECRET, SECKILL_CURRENCY).

var currencyCode = regexp.MustCompile(`^[A-Za-z]{3}$`)

// stripeSecrets is SECKILL_STRIPE_WEBHOOK_SECRET's secrets, in order (nil
// when unset).
func (c *Config) stripeSecrets() []string {
	if strings.TrimSpace(c.StripeWebhookSecret) == "" {
		return nil
	}
	var out []string
	for _, s := range strings.Split(c.StripeWebhookSecret, ",") {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// currency is SECKILL_CURRENCY, lower case as Stripe writes it.
func (c *Config) currency() string {
	if c.Currency == "" {
		return DefaultCurrency
	}
	return strings.ToLower(c.Currency)
}

// validatePayments checks the webhook's settings.
func (c *Config) validatePayments() []error {
	var problems []error
	for i, s := range c.stripeSecrets() {
		if s == "" {
			problems = append(problems, fmt.Errorf("SECKILL_STRIPE_WEBHOOK_SECRET: secret %d of the list is empty", i+1))
		}
	}
	if c.StripeWebhookSecret != "" && c.stripeSecrets() == nil {
		problems = append(problems, errors.New("SECKILL_STRIPE_WEBHOOK_SECRET is blank"))
	}
	if c.Currency != "" && !currencyCode.MatchString(c.Currency) {
		problems = append(problems, fmt.Errorf("SECKILL_CURRENCY=%q: want a three-letter ISO 4217 code such as usd", c.Currency))
	}
	return problems
}
