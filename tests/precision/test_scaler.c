/* The fp16-mixed loss scaler (plugins/precision-fp16-mixed/scaler.c): backoff and skip on
 * overflow, growth after growth_interval clean steps, hysteresis, min_scale, the FLT_MAX
 * ceiling, and restoring a saved state. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "precision_tests.h"
#include "scaler.h"

static fg_scaler make(double init, int64_t interval, int64_t hysteresis, double min_scale)
{
    fg_scaler sc;
    fg_scaler_config cfg = {init, 2.0, 0.5, min_scale, interval, hysteresis};
    fg_error e = {0};
    CHECK(fg_scaler_init(&sc, &cfg, &e) == FG_OK, "init: %s", e.message);
    return sc;
}

static void backoff_and_growth(void)
{
    fg_scaler sc = make(65536, 3, 1, 1);
    CHECK(fg_scaler_update(&sc, 1) == 1 && sc.s.scale == 32768, "overflow: skip and halve, got %g",
          sc.s.scale);
    CHECK(fg_scaler_update(&sc, 0) == 0 && fg_scaler_update(&sc, 0) == 0 && sc.s.scale == 32768,
          "two clean steps of three: no growth yet (%g)", sc.s.scale);
    CHECK(fg_scaler_update(&sc, 0) == 0 && sc.s.scale == 65536 && sc.s.growth_tracker == 0,
          "third clean step: doubled (%g, tracker %lld)", sc.s.scale,
          (long long)sc.s.growth_tracker);
    fg_scaler_update(&sc, 0);
    fg_scaler_update(&sc, 0);
    CHECK(fg_scaler_update(&sc, 1) == 1 && sc.s.growth_tracker == 0 && sc.s.scale == 32768,
          "an overflow resets the clean-step count (%g)", sc.s.scale);
    CHECK(sc.s.skipped_steps == 2, "skipped steps counted: %lld", (long long)sc.s.skipped_steps);
}

static void hysteresis_and_floor(void)
{
    fg_scaler sc = make(8, 1000, 2, 2);
    CHECK(fg_scaler_update(&sc, 1) == 1 && sc.s.scale == 8 && sc.s.hysteresis_left == 1,
          "hysteresis 2: the first overflow is skipped without backoff (%g)", sc.s.scale);
    CHECK(fg_scaler_update(&sc, 1) == 1 && sc.s.scale == 4, "the second backs off (%g)",
          sc.s.scale);
    CHECK(fg_scaler_update(&sc, 1) == 1 && sc.s.scale == 2, "then every one (%g)", sc.s.scale);
    CHECK(fg_scaler_update(&sc, 1) == 1 && sc.s.scale == 2, "min_scale holds (%g)", sc.s.scale);
    fg_scaler big = make(FLT_MAX, 1, 1, 1);
    fg_scaler_update(&big, 0);
    CHECK(big.s.scale == FLT_MAX, "growth stops at FLT_MAX (%g)", big.s.scale);
}

static void config_and_restore(void)
{
    fg_scaler sc;
    fg_error e = {0};
    fg_scaler_config bad = {4, 2, 0.5, 8, 10, 1};
    CHECK(fg_scaler_init(&sc, &bad, &e) == FG_INVALID_ARGUMENT && strstr(e.message, "min_scale"),
          "min_scale above init_scale refused: %s", e.message);
    sc = make(65536, 2000, 2, 1);
    fg_loss_scaler_state s = {sizeof s, 1024, 17, 1, 5};
    CHECK(fg_scaler_restore(&sc, &s, &e) == FG_OK && sc.s.scale == 1024 &&
              sc.s.growth_tracker == 17 && sc.s.hysteresis_left == 1 && sc.s.skipped_steps == 5,
          "restored exactly: %s", e.message);
    fg_loss_scaler_state nan_state = {sizeof s, NAN, 0, 1, 0};
    CHECK(fg_scaler_restore(&sc, &nan_state, &e) == FG_INVALID_ARGUMENT,
          "a NaN scale is refused");
}

void test_group_scaler(void)
{
    backoff_and_growth();
    hysteresis_and_floor();
    config_and_restore();
}
