//! [`RedisLedger`]: budgets' counters in Redis, shared by every replica.

use std::fmt;
use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{
    Charge, Exceeded, Ledger, LedgerError, Reserved, Window, check_call, in_counter_order,
};

/// The key of the marker a ledger checks on every call: set by
/// [`RedisLedger::initialize`], gone when Redis lost its data.
const MARKER: &str = "crew:budget:marker";

/// Where the first ledger that found the marker gone writes when (ms on
/// Redis's clock): the counters are trusted again for a budget once its
/// window has passed since.
const LOST: &str = "crew:budget:lost";

/// How far a replica's clock may run from Redis's, by default, when a
/// ledger judges whether a budget's window passed since a loss.
const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(5);

/// Admits a call if every charge fits, and counts them, atomically. A
/// counter is a hash of its slices. KEYS: none (one Redis, not a
/// cluster). ARGV: marker key, epoch, call key, kept seconds, hold (1:
/// keep for a settlement), charges count, lost key, clock skew (ms), then
/// per charge: counter, first slice, slice, amount, limit, budget, expiry
/// seconds (0: none), and how long after a loss its counter is trusted
/// again (ms; 0: from the next UTC day on; -1: never).
///
/// A marker gone (Redis lost its data) is recorded with the time it was
/// first found gone; a charge is then admitted only once its window has
/// passed since (clock skew allowed for both ways), else refused with
/// `{-3, charge}`. A marker of another epoch (initialized again) refuses
/// the call with `{-1}`: the ledger must connect again.
const RESERVE: &str = r#"
local marker, epoch, call, kept, hold, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local lost, skew = ARGV[7], tonumber(ARGV[8])
local mark = redis.call('GET', marker)
if mark ~= epoch then
  if mark then return {-1} end
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('SET', lost, string.format('%d', now), 'NX')
  local since = tonumber(redis.call('GET', lost))
  for i = 0, n - 1 do
    local recover = tonumber(ARGV[9 + i * 8 + 7])
    if recover < 0 then return {-3, i} end
    if recover == 0 then
      if math.floor((now - skew) / 86400000) <= math.floor((since + skew) / 86400000) then return {-3, i} end
    elseif now - since < recover + 2 * skew then
      return {-3, i}
    end
  end
end
if redis.call('EXISTS', call) == 1 then return {0} end
local used = {}
for i = 0, n - 1 do
  local at = 9 + i * 8
  local counter, first, slice = ARGV[at], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
  local amount, limit = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
  local sum = 0
  if first == slice then
    sum = tonumber(redis.call('HGET', counter, ARGV[at + 2]) or '0')
  else
    local fields = {}
    for s = first, slice do fields[#fields + 1] = tostring(s) end
    for _, v in ipairs(redis.call('HMGET', counter, unpack(fields))) do
      if v then sum = sum + tonumber(v) end
    end
  end
  if sum + amount > limit then return {-2, i, sum} end
  used[i] = sum
end
for i = 0, n - 1 do
  local at = 9 + i * 8
  local counter, slice, amount = ARGV[at], ARGV[at + 2], ARGV[at + 3]
  redis.call('HINCRBY', counter, slice, amount)
  local expiry = tonumber(ARGV[at + 6])
  if expiry > 0 then redis.call('EXPIRE', counter, expiry) end
  if redis.call('HLEN', counter) > 200 then
    local first = tonumber(ARGV[at + 1])
    for _, field in ipairs(redis.call('HKEYS', counter)) do
      if tonumber(field) < first then redis.call('HDEL', counter, field) end
    end
  end
  local kept_amount = amount
  if hold ~= '1' then kept_amount = '-1' end
  redis.call('HSET', call, counter .. '\n' .. slice .. '\n' .. ARGV[at + 5], kept_amount)
end
redis.call('EXPIRE', call, kept)
return {1}
"#;

/// Replaces a call's reservations by what it cost. ARGV: marker key,
/// epoch, call key, costs count, then per cost: budget, cost. With the
/// marker gone, a call's record is one made since the loss (the others
/// went with it): it is settled.
const SETTLE: &str = r#"
local marker, epoch, call, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local mark = redis.call('GET', marker)
if mark and mark ~= epoch then return -1 end
local held = redis.call('HGETALL', call)
for f = 1, #held, 2 do
  local field, amount = held[f], tonumber(held[f + 1])
  if amount >= 0 then
    local counter, slice, budget = string.match(field, '^(.*)\n(.*)\n(.*)$')
    for i = 0, n - 1 do
      if ARGV[5 + i * 2] == budget then
        redis.call('HINCRBY', counter, slice, string.format('%d', tonumber(ARGV[6 + i * 2]) - amount))
        redis.call('HSET', call, field, -1)
      end
    end
  end
end
return 1
"#;

/// Budgets' counters in one Redis (not a Cluster), shared by every
/// replica that uses it: each reservation is one atomic script, in all
/// the budgets of a call or in none.
///
/// Run Redis with persistence (AOF or RDB): a Redis that restarts
/// without its data has lost every counter, and would admit each budget's
/// limit again. The ledger tells: [`RedisLedger::initialize`] leaves a
/// marker with a random epoch, and every call checks it. A Redis whose
/// marker is gone lost its data: the first call to find it so records
/// when, and each budget is unavailable to the ledger (its calls fail
/// closed) until its window has passed since (a rolling window's length,
/// the UTC day's end; never, for a budget over a kickoff's or the
/// crew's whole life), or until an operator initializes it again, knowing
/// what was lost. A marker of another epoch (initialized again since) is
/// unavailable until the ledger connects again.
///
/// ```no_run
/// use std::sync::Arc;
/// use crew_runtime::budget::{Budget, Per, RedisLedger, Window};
/// use crew_runtime::prelude::*;
///
/// # async fn run(agent: Agent) -> Result<(), Box<dyn std::error::Error>> {
/// // Once, when the Redis is new (or after a loss, deliberately):
/// // RedisLedger::initialize("redis://budgets:6379/").await?;
/// let ledger = RedisLedger::connect("redis://budgets:6379/").await?;
/// let crew = Crew::builder()
///     .agent(agent.clone())
///     .task(Task::builder("Answer").agent(&agent).build())
///     .budget(Budget::tool_calls("daily", 500).per(Per::User).window(Window::DayUtc))
///     .budget_ledger(Arc::new(ledger))
///     .build()?;
/// # let _ = crew;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisLedger {
    connection: ConnectionManager,
    /// The marker's epoch when this ledger connected (empty: it had
    /// none, its data lost).
    epoch: String,
    /// How far a replica's clock may run from Redis's, in ms.
    skew_ms: u64,
    /// Where: the URL without its password.
    shown: String,
    reserve: redis::Script,
    settle: redis::Script,
}

impl fmt::Debug for RedisLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLedger")
            .field("url", &self.shown)
            .finish_non_exhaustive()
    }
}

/// `url` without its password (`redis://user:***@host/`) and without its
/// query (where `redis+unix:` URLs carry one).
fn shown(url: &str) -> String {
    let url = url.split_once('?').map_or(url, |(before, _)| before);
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(a URL with no scheme)".to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info
                .split_once(':')
                .map_or(user_info, |(user, _)| user);
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => url.to_owned(),
    }
}

/// `duration` in ms, for a script's argument.
fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn unavailable(shown: &str, error: impl fmt::Display) -> LedgerError {
    LedgerError::Unavailable(format!("Redis at {shown}: {error}"))
}

/// A connection that gives up soon: a budget's call waits at most a
/// second or two for its counters.
async fn connect(url: &str, shown: &str) -> Result<ConnectionManager, LedgerError> {
    let client = redis::Client::open(url).map_err(|error| unavailable(shown, error))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500));
    client
        .get_connection_manager_with_config(config)
        .await
        .map_err(|error| unavailable(shown, error))
}

impl RedisLedger {
    /// A ledger on the Redis at `url` (`redis://host:port/db`,
    /// `redis+unix:///path/to/socket`), which must have been initialized
    /// ([`RedisLedger::initialize`]); a Redis without the marker is refused
    /// as [`LedgerError::Unavailable`].
    pub async fn connect(url: &str) -> Result<RedisLedger, LedgerError> {
        let shown = shown(url);
        let mut connection = connect(url, &shown).await?;
        let epoch: Option<String> = redis::cmd("GET")
            .arg(MARKER)
            .query_async(&mut connection)
            .await
            .map_err(|error| unavailable(&shown, error))?;
        let epoch = match epoch {
            Some(epoch) => epoch,
            None => {
                // Lost, as a ledger found before: its budgets count again
                // as their windows pass.
                let lost: bool = redis::cmd("EXISTS")
                    .arg(LOST)
                    .query_async(&mut connection)
                    .await
                    .map_err(|error| unavailable(&shown, error))?;
                if !lost {
                    return Err(unavailable(
                        &shown,
                        "it holds no budgets' marker: it is new, or it lost its data (a restart without persistence); \
                         if its counters may be taken as empty, initialize it (RedisLedger::initialize)",
                    ));
                }
                String::new()
            }
        };
        Ok(RedisLedger {
            connection,
            epoch,
            skew_ms: duration_ms(DEFAULT_CLOCK_SKEW),
            shown,
            reserve: redis::Script::new(RESERVE),
            settle: redis::Script::new(SETTLE),
        })
    }

    /// How far a replica's clock may run ahead of or behind Redis's
    /// (5 s unless told): after a loss, a budget's window is judged to
    /// have passed only that much later, so that no replica counts afresh
    /// a window whose lost counts it still covers.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use crew_runtime::budget::RedisLedger;
    ///
    /// # async fn run() -> Result<(), crew_runtime::budget::LedgerError> {
    /// let ledger = RedisLedger::connect("redis://budgets:6379/")
    ///     .await?
    ///     .with_clock_skew(Duration::from_millis(500)); // NTP keeps them close
    /// # let _ = ledger;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn with_clock_skew(mut self, skew: Duration) -> Self {
        self.skew_ms = duration_ms(skew);
        self
    }

    /// Makes the Redis at `url` a ledger's: a new marker, with a new epoch
    /// (ledgers connected before refuse to count on it until connected
    /// again), and any record of a loss gone. Run once for a new Redis,
    /// and again after it lost its data, deliberately: the counters start
    /// from what it holds.
    pub async fn initialize(url: &str) -> Result<(), LedgerError> {
        let shown = shown(url);
        let mut connection = connect(url, &shown).await?;
        let mut bytes = [0_u8; 16];
        getrandom::fill(&mut bytes).map_err(|error| unavailable(&shown, error))?;
        let epoch: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        redis::pipe()
            .atomic()
            .set(MARKER, &epoch)
            .del(LOST)
            .query_async::<()>(&mut connection)
            .await
            .map_err(|error| unavailable(&shown, error))
    }

    async fn reserve_now(
        &self,
        call: &str,
        charges: &[Charge],
        hold: bool,
    ) -> Result<Reserved, LedgerError> {
        check_call(call)?;
        let ordered = in_counter_order(charges)?;
        if ordered.is_empty() {
            return Ok(Reserved::New);
        }
        let now = super::in_process::system_ms();
        let mut invocation = self.reserve.prepare_invoke();
        invocation
            .arg(MARKER)
            .arg(&self.epoch)
            .arg(format!("crew:budget:call:{call}"))
            .arg(super::CALL_KEPT.as_secs())
            .arg(if hold { "1" } else { "0" })
            .arg(ordered.len())
            .arg(LOST)
            .arg(self.skew_ms);
        for charge in &ordered {
            let (first, slice) = charge.window_of().slices(now);
            let expiry = match charge.window_of() {
                Window::Lifetime => 0,
                Window::DayUtc => 2 * 86_400,
                Window::Rolling(length) => length.as_secs().saturating_add(86_400),
            };
            // After a loss: -1 never counted again, 0 from the next UTC
            // day on, else after that many ms.
            let recovers = charge.window_of().recovers_after_ms().unwrap_or(-1);
            invocation
                .arg(format!("crew:budget:counter:{}", charge.counter()))
                .arg(first)
                .arg(slice)
                .arg(charge.amount())
                .arg(charge.limit())
                .arg(charge.budget())
                .arg(expiry)
                .arg(recovers);
        }
        let mut connection = self.connection.clone();
        let answer: Vec<i64> = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|error| unavailable(&self.shown, error))?;
        match answer.as_slice() {
            [1] => Ok(Reserved::New),
            [0] => Ok(Reserved::Before),
            [-1] => Err(self.lost()),
            [-3, index] => {
                let budget = usize::try_from(*index)
                    .ok()
                    .and_then(|index| ordered.get(index))
                    .map_or("?", |charge| charge.budget());
                Err(unavailable(
                    &self.shown,
                    format!(
                        "its budgets' marker is gone: it lost its data (a restart without persistence), and budget \
                         `{budget}` is not counted on it until its window has passed since the loss was found, or \
                         an operator initializes it (RedisLedger::initialize) and the ledger connects again"
                    ),
                ))
            }
            [-2, index, used] => {
                let charge = usize::try_from(*index)
                    .ok()
                    .and_then(|index| ordered.get(index))
                    .copied()
                    .ok_or_else(|| unavailable(&self.shown, "an answer naming no charge"))?;
                Err(LedgerError::Exceeded(Exceeded {
                    budget: charge.budget().to_owned(),
                    key: charge.key().to_owned(),
                    limit: charge.limit(),
                    used: u64::try_from(*used).unwrap_or(0),
                    asked: charge.amount(),
                }))
            }
            other => Err(unavailable(
                &self.shown,
                format!("an answer this ledger does not know: {other:?}"),
            )),
        }
    }

    /// Why a Redis whose marker changed or went is not counted on.
    fn lost(&self) -> LedgerError {
        unavailable(
            &self.shown,
            "its budgets' marker is gone or changed since this ledger connected: it lost its data (a restart without \
             persistence) or was initialized again; its counters are not trusted until an operator initializes it \
             and the ledger connects again",
        )
    }
}

impl Ledger for RedisLedger {
    fn reserve<'a>(
        &'a self,
        call: &'a str,
        charges: &'a [Charge],
    ) -> BoxFuture<'a, Result<Reserved, LedgerError>> {
        Box::pin(self.reserve_now(call, charges, true))
    }

    fn count<'a>(
        &'a self,
        call: &'a str,
        charges: &'a [Charge],
    ) -> BoxFuture<'a, Result<Reserved, LedgerError>> {
        Box::pin(self.reserve_now(call, charges, false))
    }

    fn settle<'a>(
        &'a self,
        call: &'a str,
        costs: &'a [(&'a str, u64)],
    ) -> BoxFuture<'a, Result<(), LedgerError>> {
        Box::pin(async move {
            let mut invocation = self.settle.prepare_invoke();
            invocation
                .arg(MARKER)
                .arg(&self.epoch)
                .arg(format!("crew:budget:call:{call}"))
                .arg(costs.len());
            for (budget, cost) in costs {
                invocation.arg(*budget).arg(*cost);
            }
            let mut connection = self.connection.clone();
            let answer: i64 = invocation
                .invoke_async(&mut connection)
                .await
                .map_err(|error| unavailable(&self.shown, error))?;
            if answer == -1 {
                return Err(self.lost());
            }
            Ok(())
        })
    }

    fn forget<'a>(&'a self, charges: &'a [Charge]) -> BoxFuture<'a, Result<(), LedgerError>> {
        Box::pin(async move {
            if charges.is_empty() {
                return Ok(());
            }
            let keys: Vec<String> = charges
                .iter()
                .map(|charge| format!("crew:budget:counter:{}", charge.counter()))
                .collect();
            let mut connection = self.connection.clone();
            redis::cmd("DEL")
                .arg(keys)
                .query_async::<()>(&mut connection)
                .await
                .map_err(|error| unavailable(&self.shown, error))
        })
    }

    fn used<'a>(&'a self, charge: &'a Charge) -> BoxFuture<'a, Result<u64, LedgerError>> {
        Box::pin(async move {
            let (first, last) = charge.window_of().slices(super::in_process::system_ms());
            let fields: Vec<String> = (first..=last).map(|slice| slice.to_string()).collect();
            let mut connection = self.connection.clone();
            let values: Vec<Option<u64>> = redis::cmd("HMGET")
                .arg(format!("crew:budget:counter:{}", charge.counter()))
                .arg(fields)
                .query_async(&mut connection)
                .await
                .map_err(|error| unavailable(&self.shown, error))?;
            Ok(values.into_iter().flatten().sum())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_url_is_shown_without_its_password() {
        assert_eq!(
            shown("redis://ops:s3cret@db:6379/2"),
            "redis://ops:***@db:6379/2"
        );
        assert_eq!(shown("redis://:s3cret@db/"), "redis://:***@db/");
        assert_eq!(shown("redis://db:6379/"), "redis://db:6379/");
        assert_eq!(
            shown("redis+unix:///tmp/r.sock?pass=s3cret"),
            "redis+unix:///tmp/r.sock"
        );
        assert!(!shown("s3cret").contains("s3cret"));
    }
}
