-- vt.game: the verification game of PROTOCOL.md as a Lua library.
--
-- Four parties, each an object with its own store: a trainer (commits a run), an auditor
-- (replays it on its own profile), a judge (replays one disputed interval) and a client (who
-- drives the game and gets the verdict). Parties never share objects: every request and reply
-- is a message serialized to one line of JSON (docs/api/game.md) and appended to the
-- transcript of each party that sends or receives it. A party may live in another vtrun
-- process, under another device profile (vt.game.remote); the messages are the same.
--
--   local net = vt.game.network{}
--   net:add(vt.game.trainer{runner = trainer})
--   net:add(vt.game.auditor{store = vt.store.open("a"), data = data, profile = "splitk4"})
--   net:add(vt.game.judge{store = vt.store.open("j"), data = data, profile = "blocked"})
--   local verdict = vt.game.play{network = net, client = vt.game.client{store = vt.store.open("c")}}
--   print(verdict.outcome, verdict.interval.first_step, verdict.interval.last_step)
local M = {}

local json = vt.json
local ZERO = string.rep("0", 64)

-- ---------------------------------------------------------------------------------------
-- Helpers

-- Raises "api: unknown option 'x' (valid: a, b)" for a key outside `valid`; returns the
-- options ({} for nil). Shared with vt.calibrate.
local function check_options(api, options, valid)
  if options == nil then return {} end
  if type(options) ~= "table" then error(api .. ": options must be a table", 3) end
  local allowed = {}
  for _, k in ipairs(valid) do allowed[k] = true end
  for k in pairs(options) do
    if not allowed[k] then
      table.sort(valid)
      error(string.format("%s: unknown option '%s' (valid: %s)", api, tostring(k), table.concat(valid, ", ")), 3)
    end
  end
  return options
end

M.check_options = check_options

-- A data set from a recipe table ({kind = "fashion_mnist", limit = 4096}), so a party in
-- another process can build the same data; a data set object is returned as is.
function M.data(recipe)
  if type(recipe) == "userdata" then return recipe end
  if type(recipe) ~= "table" or type(recipe.kind) ~= "string" then
    error("vt.game.data: a recipe is a table {kind = \"fashion_mnist\" | \"text\" | \"synthetic\", ...}", 2)
  end
  local options = {}
  for k, v in pairs(recipe) do
    if k ~= "kind" then options[k] = v end
  end
  local make = vt.data[recipe.kind]
  if type(make) ~= "function" then
    error("vt.game.data: unknown data kind '" .. recipe.kind .. "' (valid: fashion_mnist, text, synthetic)", 2)
  end
  return make(options)
end

-- Steps of leaf `i` of a run with n steps and checkpoints every k: (first, last), or nil for leaf 0.
function M.interval(i, k, n)
  if i == 0 then return nil end
  return (i - 1) * k + 1, math.min(i * k, n)
end

local function leaf_count(k, n)
  if n == 0 then return 1 end
  return math.ceil(n / k) + 1
end

-- RFC 6962 trees in Lua over hex leaves, for a party that claims leaves its store does not hold.
local function largest_power_below(n)
  local k = 1
  while k * 2 < n do k = k * 2 end
  return k
end

local function mth(leaves, lo, hi)
  local n = hi - lo
  if n == 0 then return vt.merkle.empty_root() end
  if n == 1 then return vt.merkle.leaf_hash(leaves[lo + 1]) end
  local k = largest_power_below(n)
  return vt.merkle.node_hash(mth(leaves, lo, lo + k), mth(leaves, lo + k, hi))
end

local function path(m, leaves, lo, hi)
  local n = hi - lo
  if n <= 1 then return {} end
  local k = largest_power_below(n)
  local p
  if m < k then
    p = path(m, leaves, lo, lo + k)
    p[#p + 1] = mth(leaves, lo + k, hi)
  else
    p = path(m - k, leaves, lo + k, hi)
    p[#p + 1] = mth(leaves, lo, lo + k)
  end
  return p
end

M.merkle = {
  root = function(leaves, size) return mth(leaves, 0, size or #leaves) end,
  prove = function(leaves, i, size) return path(i, leaves, 0, size or #leaves) end,
}

-- The log digest of a leaf's steps ({ {step=, records=}, ... }), as the store computes it.
local function log_digest_of(steps)
  local digests = {}
  for i, s in ipairs(steps) do digests[i] = vt.store.step_digest(s.step, s.records) end
  return vt.store.log_digest(digests)
end

-- Bytes longer than this are kept in transcripts as their digest and size only.
local TRANSCRIPT_INLINE = 4096

local function summarize(value)
  if type(value) == "string" then
    if #value > TRANSCRIPT_INLINE then return {sha256 = vt.store.sha256(value), bytes = #value} end
    return value
  end
  if type(value) ~= "table" or value == json.null then return value end
  local out = {}
  for k, v in pairs(value) do out[k] = summarize(v) end
  return out
end

-- ---------------------------------------------------------------------------------------
-- Parties: the common part. A party has a name, a store, handlers by message type, and a
-- `net` (set when added to a network) through which it sends requests of its own.

local Party = {}
Party.__index = Party

local function new_party(kind, name, store, behaviour)
  if store == nil or type(store) ~= "userdata" then error("vt.game." .. kind .. ": option 'store' is required (vt.store.open(path))", 3) end
  local p = setmetatable({kind = kind, name = name or kind, store = store, behaviour = behaviour or {}, handlers = {}}, Party)
  return p
end

-- Appends one message (its JSON text, large bytes summarized) to this party's transcript of `game`.
function Party:record(game, message)
  self.store:append_transcript(game, json.encode(summarize(message)))
end

-- Handles a request message (a decoded table); returns the reply body, or raises.
function Party:dispatch(message)
  local refuse = self.behaviour.refuse
  if refuse and (refuse == true or refuse[message.type]) then
    return {refused = true}
  end
  local delay = self.behaviour.delay
  if delay and delay[message.type] then
    local t0 = vt.clock()
    while vt.clock() - t0 < delay[message.type] do end
  end
  local handler = self.handlers[message.type]
  if handler == nil then error(string.format("%s '%s' does not answer '%s' requests", self.kind, self.name, message.type)) end
  return handler(self, message.body, message)
end

-- Sends a request through the network as this party.
function Party:request(to, type_, body)
  return self.net:request(self.name, to, type_, body)
end

-- ---------------------------------------------------------------------------------------
-- The network: delivers serialized messages between named parties, keeps the sequence
-- number, enforces deadlines, and turns a refusal, an error or a missed deadline into a
-- forfeit (an error object {forfeit = party, reason = ...} raised to the caller).

local Network = {}
Network.__index = Network

local games_made = 0
local DEFAULT_DEADLINES = {default = 60, audit = 24 * 3600, adjudicate = 24 * 3600, bisect = 3600}

function M.network(options)
  options = check_options("vt.game.network", options, {"game", "deadlines"})
  local deadlines = {}
  for k, v in pairs(DEFAULT_DEADLINES) do deadlines[k] = v end
  for k, v in pairs(options.deadlines or {}) do deadlines[k] = v end
  -- A fresh game id by default, so a party's store can hold many games (the auditor keeps
  -- its replay as a run named after the game).
  games_made = games_made + 1
  local game = options.game or string.format("game-%d-%d", os.time(), games_made)
  return setmetatable({game = game, parties = {}, seq = 0, deadlines = deadlines, log = {}}, Network)
end

function Network:add(party)
  if self.parties[party.name] then error("vt.game.network: a party named '" .. party.name .. "' is already in the game", 2) end
  self.parties[party.name] = party
  party.net = {request = function(_, from, to, type_, body) return self:request(from, to, type_, body) end}
  if party.attach then party:attach(self) end
  return party
end

function Network:party(name) return self.parties[name] end

local Forfeit = {}
Forfeit.__index = Forfeit
Forfeit.__tostring = function(f) return string.format("%s forfeits: %s", f.forfeit, f.reason) end
M.is_forfeit = function(e) return getmetatable(e) == Forfeit end

local function forfeit(party, reason)
  error(setmetatable({forfeit = party, reason = reason}, Forfeit), 0)
end

-- The shape of every answer, checked before the asking party uses it: a malformed answer
-- makes the answering party lose, not the one that asked.
local function is_hex(v) return type(v) == "string" and #v == 64 and v:match("^[0-9a-f]+$") ~= nil end
local function is_int(v) return type(v) == "number" and v >= 0 and v == math.floor(v) end
local function is_array(v, item)
  if type(v) ~= "table" then return false end
  for _, x in ipairs(v) do
    if not item(x) then return false end
  end
  return true
end
local function is_leaf(v)
  return type(v) == "table" and is_int(v.index) and is_hex(v.leaf) and is_array(v.proof, is_hex)
end
local function is_full_leaf(v) return is_leaf(v) and is_hex(v.state_digest) and is_hex(v.log_digest) end
local function is_record(r)
  return type(r) == "table" and type(r.boundary) == "string" and is_int(r.call) and type(r.value) == "string"
end
local function is_steps(v)
  return is_array(v, function(st) return type(st) == "table" and is_int(st.step) and is_array(st.records, is_record) end)
end
local SCHEMAS = {
  commit = {spec = function(v) return type(v) == "string" end, spec_hash = is_hex, n_leaves = is_int, root = is_hex,
            checkpoint_every = is_int, steps = is_int},
  logs = {leaf = is_full_leaf, steps = is_steps},
  leaf = {index = is_int, leaf = is_hex, proof = function(v) return is_array(v, is_hex) end},
  handover = {steps = is_steps},
  weights = {leaf = is_full_leaf, checkpoint = function(v) return type(v) == "string" end},
  audit = {root = is_hex, n_leaves = is_int},
  bisect = {rounds = is_int},
  adjudicate = {outcome = function(v) return type(v) == "string" end},
}
M.is_full_leaf = is_full_leaf

-- The body of a decoded reply, or the forfeit it implies: an error reply, a forfeit passed
-- on from a nested request, a refusal, or a malformed answer.
local check_answer
local function accept_reply(to, type_, reply)
  if reply.error then forfeit(to, "error answering '" .. type_ .. "': " .. tostring(reply.error)) end
  if reply.forfeit then error(setmetatable({forfeit = reply.forfeit.party, reason = reply.forfeit.reason}, Forfeit), 0) end
  if reply.body and reply.body.refused then forfeit(to, "refused to answer '" .. type_ .. "'") end
  check_answer(to, type_, reply.body)
  return reply.body
end

function check_answer(to, type_, body)
  local schema = SCHEMAS[type_]
  if schema == nil or (type(body) == "table" and body.refused) then return end
  if type(body) ~= "table" then forfeit(to, "malformed answer to '" .. type_ .. "': not an object") end
  local fields = {}
  for field in pairs(schema) do fields[#fields + 1] = field end
  table.sort(fields)  -- the first bad field in name order, so the message is stable
  for _, field in ipairs(fields) do
    if not schema[field](body[field]) then
      forfeit(to, "malformed answer to '" .. type_ .. "': field '" .. field .. "' is missing or invalid")
    end
  end
end

-- One request/reply exchange. The request and the reply cross as JSON text; both are
-- appended to the sender's and the receiver's transcripts (a remote party appends in its own
-- process). Returns the reply body.
function Network:request(from, to, type_, body)
  local sender, receiver = self.parties[from], self.parties[to]
  if receiver == nil then error("vt.game: no party named '" .. tostring(to) .. "'", 2) end
  self.seq = self.seq + 1
  local request = {kind = "request", game = self.game, seq = self.seq, from = from, to = to, type = type_, body = body or {}}
  local text = json.encode(request)
  if sender and sender.record then sender:record(self.game, request) end
  local deadline = self.deadlines[type_] or self.deadlines.default
  local t0 = vt.clock()
  local ok, reply_text, nested = pcall(receiver.deliver, receiver, text, deadline, self)
  local elapsed = vt.clock() - t0 - (nested or 0)
  if not ok then
    if M.is_forfeit(reply_text) then error(reply_text, 0) end
    forfeit(to, "failed to answer '" .. type_ .. "': " .. tostring(reply_text))
  end
  local reply = json.decode(reply_text)
  if sender and sender.record then sender:record(self.game, reply) end
  self.log[#self.log + 1] = {seq = self.seq, from = from, to = to, type = type_, bytes = #text + #reply_text, seconds = elapsed}
  if elapsed > deadline and not reply.error and not reply.forfeit then
    forfeit(to, string.format("missed the deadline of '%s' (%.2f s > %.2f s)", type_, elapsed, deadline))
  end
  return accept_reply(to, type_, reply)
end

-- A local party receives the request's text, handles it and returns the reply's text.
-- Errors become an error reply; a forfeit raised by a nested request travels in the reply.
function Party:deliver(text)
  local request = json.decode(text)
  self:record(request.game, request)
  local ok, body = pcall(self.dispatch, self, request)
  local reply = {kind = "reply", game = request.game, seq = request.seq, from = self.name, to = request.from, type = request.type}
  if ok then
    reply.body = body
  elseif M.is_forfeit(body) then
    reply.forfeit = {party = body.forfeit, reason = body.reason}
  else
    reply.error = tostring(body)
  end
  self:record(request.game, reply)
  return json.encode(reply)
end

-- ---------------------------------------------------------------------------------------
-- Trainer party: answers from its committed run.
--
-- behaviour (the protocol-level cheats of PROTOCOL.md's scenarios):
--   refuse = {type = true}      refuse these requests ("logs", "leaf", "handover", "weights")
--   delay = {type = seconds}    answer late
--   rewrite_logs = {step = s}   disclose step s's records with one logged direction flipped
--   withhold_record = {step = s}  disclose step s without one of its records (the first
--                               that holds a logged entry)
--   replay_record = {step = s, from = t}  disclose step s with one record (the first whose
--                               bytes differ) replaced by step t's record of the same boundary
--                               and call
--   leaves_from = run           answer every `leaf` request (bisection, judge) from another
--                               run's tree (a store run object, e.g. the honest run's): leaves
--                               and proofs inconsistent with the commitment
--   substitute_weights = true   return other weights than the last leaf's
local Trainer = setmetatable({}, {__index = Party})
Trainer.__index = Trainer

function M.trainer(options)
  options = check_options("vt.game.trainer", options, {"runner", "store", "run", "name", "behaviour"})
  local store, run_id = options.store, options.run or "run"
  if options.runner then store, run_id = options.runner:store(), options.runner:run_id() end
  local self = setmetatable(new_party("trainer", options.name, store, options.behaviour), Trainer)
  self.run = store:run(run_id)
  if self.run == nil then error("vt.game.trainer: store '" .. store:path() .. "' has no run '" .. run_id .. "'", 2) end
  if not self.run:info().complete then error("vt.game.trainer: run '" .. run_id .. "' is not complete; train it first", 2) end
  self.handlers = {commit = Trainer.on_commit, logs = Trainer.on_logs, leaf = Trainer.on_leaf,
                   handover = Trainer.on_handover, weights = Trainer.on_weights}
  return self
end

function Trainer:info() return self.run:info() end

function Trainer:on_commit()
  local info = self.run:info()
  return {spec = self.run:spec(), spec_hash = info.spec_hash, n_leaves = info.leaves, root = self.run:root(),
          checkpoint_every = info.checkpoint_every, steps = info.steps}
end

-- Flips the first logged direction of a record (DOWN <-> UP), as a trainer rewriting its logs would.
local function flip_first_direction(value)
  local flipped = vt.log.decode(value):flipped()
  return flipped and flipped:encode() or nil
end

function Trainer:steps_of(leaf)
  local info = self.run:info()
  local first, last = M.interval(leaf, info.checkpoint_every, info.steps)
  local steps = {}
  if first == nil then return steps end
  for s = first, last do
    local records = self.run:step(s)
    local rewrite = self.behaviour.rewrite_logs
    if rewrite and rewrite.step == s then
      for _, r in ipairs(records) do
        local flipped = r.boundary ~= "~trace" and flip_first_direction(r.value)
        if flipped then r.value = flipped break end
      end
    end
    local withhold = self.behaviour.withhold_record
    if withhold and withhold.step == s then
      local chosen
      for i, r in ipairs(records) do
        if r.boundary ~= "~trace" then
          local c = vt.log.decode(r.value):counts()
          if chosen == nil or c.down + c.up + c.exact > 0 then chosen = i end
          if c.down + c.up + c.exact > 0 then break end
        end
      end
      if chosen then table.remove(records, chosen) end
    end
    local replay = self.behaviour.replay_record
    if replay and replay.step == s then
      local other = {}
      for _, r in ipairs(self.run:step(replay.from)) do other[r.boundary .. "#" .. r.call] = r.value end
      for _, r in ipairs(records) do
        local v = r.boundary ~= "~trace" and other[r.boundary .. "#" .. r.call]
        if v and v ~= r.value then r.value = v break end
      end
    end
    steps[#steps + 1] = {step = s, records = records}
  end
  return steps
end

function Trainer:leaf_message(i, run)
  run = run or self.run
  local info = run:leaf_info(i)
  if info == nil then error("no leaf " .. tostring(i) .. " (the run has " .. run:size() .. ")") end
  return {index = i, leaf = info.leaf, state_digest = info.state_digest, log_digest = info.log_digest,
          proof = run:prove(i)}
end

function Trainer:on_logs(body)
  return {leaf = self:leaf_message(body.leaf), steps = self:steps_of(body.leaf)}
end

function Trainer:on_leaf(body)
  local run = self.behaviour.leaves_from or self.run
  local m = self:leaf_message(body.index, run)
  local n = run:size()
  m.prefix_root = run:root(body.index + 1)
  m.consistency = run:consistency(body.index + 1, n)
  return m
end

function Trainer:on_handover(body)
  local j = body.leaf
  local out = {leaf = j, steps = self:steps_of(j)}
  if j > 0 then out.checkpoint = self.run:checkpoint(j - 1) end
  return out
end

function Trainer:on_weights()
  local last = self.run:size() - 1
  local checkpoint = self.run:checkpoint(last)
  if self.behaviour.substitute_weights then
    -- Other weights: every float32 entry nudged by one unit in the last place of its first value.
    local entries = vt.store.checkpoint_decode(checkpoint)
    for _, e in ipairs(entries) do
      if e.dtype == "float32" and #e.data >= 4 then
        local b = e.data:byte(1)
        e.data = string.char((b + 1) % 256) .. e.data:sub(2)
      end
    end
    checkpoint = vt.store.checkpoint_encode(entries)
  end
  return {leaf = self:leaf_message(last), checkpoint = checkpoint}
end

-- ---------------------------------------------------------------------------------------
-- Verifying the trainer's answers (auditor, judge and client all do this).

local function verify_leaf(m, spec_hash, n_leaves, root)
  if type(m) ~= "table" or type(m.leaf) ~= "string" then return false, "no leaf in the answer" end
  local recomputed = vt.store.leaf(spec_hash, m.index, m.state_digest, m.log_digest)
  if recomputed ~= m.leaf then return false, "leaf " .. m.index .. " does not hash from its state and log digests" end
  if not vt.merkle.verify(m.leaf, m.index, n_leaves, m.proof, root) then
    return false, "the inclusion proof of leaf " .. m.index .. " does not lead to the committed root"
  end
  return true
end
M.verify_leaf = verify_leaf

-- ---------------------------------------------------------------------------------------
-- Auditor party: replays the trainer's disclosed run on its own profile.
--
-- behaviour: refuse / delay as for the trainer; lie_from_leaf = L (claims other leaves from
-- leaf L on, in its root, in bisection and in answers).
local Auditor = setmetatable({}, {__index = Party})
Auditor.__index = Auditor

function M.auditor(options)
  options = check_options("vt.game.auditor", options, {"store", "data", "profile", "name", "behaviour", "progress"})
  if options.data == nil then error("vt.game.auditor: option 'data' is required (a data set or a recipe)", 2) end
  local self = setmetatable(new_party("auditor", options.name, options.store, options.behaviour), Auditor)
  self.data = M.data(options.data)
  self.profile = options.profile or "native"
  self.progress = options.progress
  self.handlers = {audit = Auditor.on_audit, bisect = Auditor.on_bisect, leaf = Auditor.on_leaf}
  return self
end

-- The leaves this auditor claims (its own, or lies from leaf L on).
function Auditor:claimed_leaves()
  local leaves = {}
  for i = 0, self.run:size() - 1 do leaves[i + 1] = self.run:leaf(i) end
  local lie = self.behaviour.lie_from_leaf
  if lie then
    for i = lie, #leaves - 1 do leaves[i + 1] = vt.store.sha256("a different leaf " .. i) end
  end
  return leaves
end

function Auditor:on_audit(body)
  local spec_hash = vt.store.sha256(body.spec)
  if spec_hash ~= body.spec_hash then error("the disclosed spec does not hash to the committed spec_hash") end
  local spec = vt.spec.parse(body.spec)
  local k, n = tonumber(spec:get("checkpoint_every")), tonumber(spec:get("steps"))
  if leaf_count(k, n) ~= body.n_leaves then
    error(string.format("the commitment has %d leaves; the spec implies %d", body.n_leaves, leaf_count(k, n)))
  end
  self.commit = body
  -- A replay left from an earlier game of this id would be resumed without re-checking its
  -- logs, and its evidence is gone: refuse it rather than vouch for what was not checked.
  if self.store:run(body.game or "game") ~= nil then
    error("this auditor's store already holds a replay for game '" .. tostring(body.game) ..
          "'; play each game under a new id (vt.game.network{game = ...}) or with a fresh store")
  end
  self.runner = vt.auditor{spec = spec, data = self.data, store = self.store, run = body.game or "game",
                           profile = self.profile, logs = "given"}
  self.run = self.store:run(body.game or "game")
  local totals = {corrections = 0, illegitimate = 0, near_misses = 0, log_mismatches = 0, logged = 0, elements = 0,
                  steerable = 0, steps = 0}
  local per_step = {}  -- {step, logged, steerable, illegitimate} of every replayed step
  local evidence
  local t0 = vt.clock()
  for leaf = 1, body.n_leaves - 1 do
    local first = M.interval(leaf, k, n)
    if self.runner:step_count() >= first then goto continue end  -- resumed past it
    do
      local answer = self:request(body.trainer, "logs", {leaf = leaf})
      local ok, why = verify_leaf(answer.leaf, spec_hash, body.n_leaves, body.root)
      if ok and answer.leaf.index ~= leaf then ok, why = false, "answered for another leaf" end
      if ok and log_digest_of(answer.steps) ~= answer.leaf.log_digest then
        ok, why = false, "the disclosed logs of leaf " .. leaf .. " do not match the log digest committed in the leaf"
      end
      if not ok then
        evidence = {kind = "bad_logs", leaf = leaf, reason = why}
        break
      end
      for _, s in ipairs(answer.steps) do
        local okstep, report = pcall(self.runner.step, self.runner, s.records)
        if not okstep then
          evidence = evidence or {kind = "replay_error", leaf = leaf, step = s.step, reason = tostring(report)}
          break
        end
        for key in pairs(totals) do totals[key] = totals[key] + (report[key] or 0) end
        totals.steps = totals.steps + 1
        per_step[#per_step + 1] = {step = s.step, logged = report.logged, steerable = report.steerable,
                                   illegitimate = report.illegitimate}
        if evidence == nil and (report.illegitimate > 0 or report.log_mismatches > 0) then
          local where = {}
          for name, b in pairs(report.boundaries) do
            if b.illegitimate > 0 then where[#where + 1] = {boundary = name, illegitimate = b.illegitimate} end
          end
          table.sort(where, function(a, b) return a.boundary < b.boundary end)
          evidence = {kind = report.illegitimate > 0 and "illegitimate" or "log_mismatch", leaf = leaf, step = s.step,
                      illegitimate = report.illegitimate, log_mismatches = report.log_mismatches,
                      log_mismatch = report.log_mismatch, boundaries = where}
        end
        if self.progress then io.stderr:write(string.format("\r  auditor: step %d/%d", s.step, n)) end
      end
      if evidence and evidence.kind == "replay_error" then break end
    end
    ::continue::
  end
  if self.progress then io.stderr:write("\n") end
  local leaves = self:claimed_leaves()
  return {root = M.merkle.root(leaves), n_leaves = #leaves, totals = totals, per_step = per_step, evidence = evidence,
          seconds = vt.clock() - t0, profile = self.profile}
end

function Auditor:on_leaf(body)
  local leaves = self:claimed_leaves()
  local i = body.index
  if i < 0 or i >= #leaves then error("no leaf " .. i .. " (this auditor holds " .. #leaves .. ")") end
  local info = self.run:leaf_info(i)
  local m = {index = i, leaf = leaves[i + 1], proof = M.merkle.prove(leaves, i), n_leaves = #leaves,
             root = M.merkle.root(leaves)}
  if info and info.leaf == m.leaf then
    m.state_digest, m.log_digest = info.state_digest, info.log_digest
  end
  return m
end

-- Bisection over prefix roots: leaf m "agrees" when the trainer's tree of the first m + 1
-- leaves has this auditor's root of them (proved against the committed root by a
-- consistency proof, the leaf itself by an inclusion proof). Agreement holds for a prefix and
-- fails after it, so ceil(log2(n)) queries find the first differing leaf j.
function Auditor:on_bisect(body)
  local c = self.commit
  local spec_hash, n = c.spec_hash, c.n_leaves
  local mine = self:claimed_leaves()
  local function agrees(m)
    if m + 1 > #mine then return false, nil end
    local answer = self:request(body.trainer, "leaf", {index = m})
    local ok, why = verify_leaf(answer, spec_hash, n, c.root)
    if ok and not vt.merkle.verify_consistency(answer.prefix_root, m + 1, n, answer.consistency, c.root) then
      ok, why = false, "the prefix root of " .. (m + 1) .. " leaves is not consistent with the committed root"
    end
    if not ok then error({bad_answer = why, index = m}) end
    return answer.prefix_root == M.merkle.root(mine, m + 1), answer
  end
  local lo, hi, rounds = -1, n - 1, 0
  if #mine == n and M.merkle.root(mine) == c.root then return {agreed = true, rounds = 0} end
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    rounds = rounds + 1
    local ok, agree = pcall(agrees, mid)
    if not ok then
      if type(agree) == "table" and agree.bad_answer then
        return {first_differing = mid, rounds = rounds, bad_answer = agree.bad_answer}
      end
      error(agree, 0)
    end
    if agree then lo = mid else hi = mid end
  end
  return {first_differing = hi, rounds = rounds}
end

-- ---------------------------------------------------------------------------------------
-- Judge party: replays one interval on its own profile and decides.
local Judge = setmetatable({}, {__index = Party})
Judge.__index = Judge

function M.judge(options)
  options = check_options("vt.game.judge", options, {"store", "data", "profile", "name"})
  if options.data == nil then error("vt.game.judge: option 'data' is required (a data set or a recipe)", 2) end
  local self = setmetatable(new_party("judge", options.name, options.store), Judge)
  self.data = M.data(options.data)
  self.profile = options.profile or "native"
  self.handlers = {adjudicate = Judge.on_adjudicate}
  return self
end

-- body: {spec, spec_hash, root (the trainer's committed root), n_leaves, leaf = j,
--        auditor_root, auditor_leaves, trainer = name, auditor = name, evidence}
function Judge:on_adjudicate(body)
  local t0 = vt.clock()
  local j = body.leaf
  local spec = vt.spec.parse(body.spec)
  local k, n = tonumber(spec:get("checkpoint_every")), tonumber(spec:get("steps"))
  local first, last = M.interval(j, k, n)
  local verdict = {leaf = j, interval = {leaf = j, first_step = first or 0, last_step = last or 0},
                   judge_profile = self.profile, evidence = {}}
  local function decide(outcome, reason)
    verdict.outcome, verdict.reason = outcome, reason
    verdict.judge_seconds = vt.clock() - t0
    return verdict
  end
  if vt.store.sha256(body.spec) ~= body.spec_hash then return decide("inconclusive", "the spec does not hash to spec_hash") end

  -- The trainer's leaves j and j-1, proved against its committed root.
  local trainer_leaf = self:request(body.trainer, "leaf", {index = j})
  local ok, why = verify_leaf(trainer_leaf, body.spec_hash, body.n_leaves, body.root)
  if not ok then return decide("trainer_at_fault", "the trainer's leaf " .. j .. ": " .. why) end
  verdict.trainer_leaf = trainer_leaf.leaf
  verdict.proofs = {trainer = trainer_leaf.proof}
  local agreed
  if j > 0 then
    agreed = self:request(body.trainer, "leaf", {index = j - 1})
    ok, why = verify_leaf(agreed, body.spec_hash, body.n_leaves, body.root)
    if not ok then return decide("trainer_at_fault", "the trainer's leaf " .. (j - 1) .. ": " .. why) end
  end
  -- The hand-over: checkpoint of leaf j-1 and the logs of interval j, each checked against the leaves.
  local handover = self:request(body.trainer, "handover", {leaf = j})
  if j > 0 and vt.store.sha256(handover.checkpoint or "") ~= agreed.state_digest then
    return decide("trainer_at_fault", "the handed-over checkpoint does not match the state digest of agreed leaf " .. (j - 1))
  end
  local log_digest = log_digest_of(handover.steps)
  if log_digest ~= trainer_leaf.log_digest then
    return decide("trainer_at_fault", "the handed-over logs do not match the log digest committed in leaf " .. j)
  end

  -- The auditor's leaves j and j-1, proved against the root it reported. An auditor whose
  -- replay stopped (at bad logs or a failed replay) holds no leaf j.
  if j < body.auditor_leaves then
    local auditor_leaf = self:request(body.auditor, "leaf", {index = j})
    if not vt.merkle.verify(auditor_leaf.leaf, j, body.auditor_leaves, auditor_leaf.proof, body.auditor_root) then
      return decide("auditor_at_fault", "the auditor's leaf " .. j .. " is not in the root it reported")
    end
    verdict.auditor_leaf = auditor_leaf.leaf
    verdict.proofs.auditor = auditor_leaf.proof
  end
  if j > 0 then
    local auditor_prev = self:request(body.auditor, "leaf", {index = j - 1})
    if not vt.merkle.verify(auditor_prev.leaf, j - 1, body.auditor_leaves, auditor_prev.proof, body.auditor_root) then
      return decide("auditor_at_fault", "the auditor's leaf " .. (j - 1) .. " is not in the root it reported")
    end
    if auditor_prev.leaf ~= agreed.leaf then
      return decide("inconclusive", "leaf " .. (j - 1) .. " is not agreed, so leaf " .. j .. " is not the first disputed one")
    end
  end

  -- The replay of interval j (or the initial state for leaf 0).
  local runner = vt.auditor{spec = spec, data = self.data, profile = self.profile, logs = "given",
                            start = j > 0 and {step = first - 1, checkpoint = handover.checkpoint} or nil}
  local illegitimate, mismatches, replay_error = 0, 0, nil
  verdict.evidence.steps = {}
  for _, s in ipairs(handover.steps) do
    local okstep, report = pcall(runner.step, runner, s.records)
    if not okstep then replay_error = tostring(report) break end
    illegitimate = illegitimate + report.illegitimate
    mismatches = mismatches + report.log_mismatches
    if report.illegitimate > 0 or report.log_mismatches > 0 or report.divergence then
      local where = {}
      for name, b in pairs(report.boundaries) do
        if b.illegitimate > 0 then where[#where + 1] = name .. " (" .. b.illegitimate .. ")" end
      end
      table.sort(where)
      verdict.evidence.steps[#verdict.evidence.steps + 1] = {
        step = s.step, illegitimate = report.illegitimate, log_mismatches = report.log_mismatches,
        log_mismatch = report.log_mismatch, divergence = report.divergence, boundaries = where}
    end
  end
  verdict.evidence.illegitimate = illegitimate
  verdict.evidence.log_mismatches = mismatches
  verdict.evidence.replay_error = replay_error
  verdict.replayed_steps = #handover.steps
  if replay_error == nil then
    local state_digest = vt.store.sha256(runner:checkpoint())
    verdict.judge_state_digest = state_digest
    verdict.judge_leaf = vt.store.leaf(body.spec_hash, j, state_digest, j > 0 and log_digest or ZERO)
  end
  if illegitimate > 0 then
    return decide("trainer_at_fault", illegitimate .. " illegitimate log entries in interval " .. j ..
                  ": entries no honest trainer writes (directions beyond twice the window, or EXACT " ..
                  "values out of reach of the replayed values)")
  end
  if mismatches > 0 then
    return decide("trainer_at_fault", "the trainer's logs do not fit the spec's computation in interval " .. j ..
                  " (" .. mismatches .. " mismatched records)")
  end
  if replay_error then return decide("inconclusive", "the judge's replay failed: " .. replay_error) end
  local matches_trainer = verdict.judge_leaf == verdict.trainer_leaf
  local matches_auditor = verdict.judge_leaf == verdict.auditor_leaf
  if verdict.auditor_leaf == nil then
    if matches_trainer then
      return decide("auditor_at_fault", "the auditor stopped before leaf " .. j .. "; the judge's replay gives the trainer's leaf")
    end
    return decide("trainer_at_fault", "the judge's replay of interval " .. j .. " does not give the trainer's leaf")
  end
  if matches_auditor and not matches_trainer then
    return decide("trainer_at_fault", "the judge's replay of interval " .. j .. " gives the auditor's leaf")
  elseif matches_trainer and not matches_auditor then
    return decide("auditor_at_fault", "the judge's replay of interval " .. j .. " gives the trainer's leaf: a false alarm")
  elseif matches_trainer and matches_auditor then
    return decide("inconclusive", "both parties agree on leaf " .. j .. " and the judge finds nothing against either")
  end
  return decide("inconclusive", "the judge's replay of interval " .. j .. " matches neither party's leaf")
end

-- ---------------------------------------------------------------------------------------
-- Client party: receives the commitment and the returned weights, drives the game.
local Client = setmetatable({}, {__index = Party})
Client.__index = Client

function M.client(options)
  options = check_options("vt.game.client", options, {"store", "name"})
  local self = setmetatable(new_party("client", options.name, options.store), Client)
  return self
end

-- ---------------------------------------------------------------------------------------
-- The game.

local OTHER = {trainer = "auditor", auditor = "trainer"}

-- Plays the whole game; returns the verdict table:
--   outcome ("accepted", "trainer_at_fault", "auditor_at_fault", "inconclusive"), reason,
--   interval = {leaf, first_step, last_step} (when a leaf was disputed), rounds, root, auditor_root,
--   evidence, judge_leaf, trainer_leaf, auditor_leaf, proofs, judge_seconds, audit, messages.
function M.play(options)
  options = check_options("vt.game.play", options, {"network", "client", "trainer", "auditor", "judge", "game", "deadlines", "on_event"})
  local net = options.network
  if net == nil then
    net = M.network{game = options.game, deadlines = options.deadlines}
    for _, p in ipairs{options.trainer, options.auditor, options.judge} do net:add(p) end
  end
  local client = options.client or net:party("client")
  if client == nil then error("vt.game.play: option 'client' is required (vt.game.client{store=})", 2) end
  if net:party(client.name) == nil then net:add(client) end
  local names = {trainer = "trainer", auditor = "auditor", judge = "judge"}
  for role, name in pairs(names) do
    if net:party(name) == nil then error("vt.game.play: the network has no party named '" .. name .. "' (" .. role .. ")", 2) end
  end
  local event = options.on_event or function() end
  local verdict = {rounds = 0}
  local t0 = vt.clock()

  local function finish(outcome, reason)
    verdict.outcome = verdict.outcome or outcome
    verdict.reason = verdict.reason or reason
    verdict.seconds = vt.clock() - t0
    verdict.messages = #net.log
    client:record(net.game, {kind = "verdict", game = net.game, from = client.name, body = summarize(verdict)})
    event("verdict", verdict)
    return verdict
  end

  local ok, result = pcall(function()
    local commit = net:request(client.name, "trainer", "commit", {})
    verdict.root, verdict.n_leaves, verdict.spec_hash = commit.root, commit.n_leaves, commit.spec_hash
    event("commit", commit)
    local audit_request = {trainer = "trainer", game = net.game}
    for key, v in pairs(commit) do audit_request[key] = v end
    local audit = net:request(client.name, "auditor", "audit", audit_request)
    verdict.audit = audit
    verdict.auditor_root = audit.root
    event("audit", audit)

    local disputed = nil
    if audit.root ~= commit.root or audit.n_leaves ~= commit.n_leaves then
      local b = net:request(client.name, "auditor", "bisect", {trainer = "trainer"})
      verdict.rounds = b.rounds
      if b.bad_answer then
        verdict.interval = {leaf = b.first_differing}
        return finish("trainer_at_fault", "the trainer's answer in bisection did not verify: " .. b.bad_answer)
      end
      disputed = b.first_differing
      event("bisect", b)
    end
    local ev = audit.evidence
    if ev and ev ~= vt.json.null and (disputed == nil or ev.leaf < disputed) then disputed = ev.leaf end

    if disputed == nil then
      -- Accepted so far: the client checks the returned weights against the last leaf.
      local w = net:request(client.name, "trainer", "weights", {})
      local okleaf, why = verify_leaf(w.leaf, commit.spec_hash, commit.n_leaves, commit.root)
      if okleaf and w.leaf.index ~= commit.n_leaves - 1 then okleaf, why = false, "not the last leaf" end
      if okleaf and vt.store.sha256(w.checkpoint) ~= w.leaf.state_digest then
        okleaf, why = false, "the returned weights do not match the state digest of the last leaf"
      end
      if not okleaf then
        local first, last = M.interval(commit.n_leaves - 1, commit.checkpoint_every, commit.steps)
        verdict.interval = {leaf = commit.n_leaves - 1, first_step = first, last_step = last}
        return finish("trainer_at_fault", why)
      end
      verdict.weights = {state_digest = w.leaf.state_digest, bytes = #w.checkpoint}
      verdict.checkpoint = w.checkpoint
      return finish("accepted", "the auditor's replay gives the committed root, with no illegitimate entries")
    end

    local first, last = M.interval(disputed, commit.checkpoint_every, commit.steps)
    verdict.interval = {leaf = disputed, first_step = first or 0, last_step = last or 0}
    event("dispute", verdict.interval)
    local judged = net:request(client.name, "judge", "adjudicate", {
      spec = commit.spec, spec_hash = commit.spec_hash, root = commit.root, n_leaves = commit.n_leaves, leaf = disputed,
      auditor_root = audit.root, auditor_leaves = audit.n_leaves, trainer = "trainer", auditor = "auditor",
      evidence = ev})
    for key, v in pairs(judged) do verdict[key] = v end
    return finish(judged.outcome, judged.reason)
  end)
  if ok then return result end
  if M.is_forfeit(result) then
    local loser = net:party(result.forfeit)
    local role = loser and loser.kind or result.forfeit
    verdict.forfeit = result.forfeit
    if role == "trainer" then return finish("trainer_at_fault", tostring(result)) end
    if role == "auditor" then return finish("auditor_at_fault", tostring(result)) end
    return finish("inconclusive", tostring(result))
  end
  error(result, 0)
end

-- ---------------------------------------------------------------------------------------
-- Remote parties: a party in another vtrun process (any profile), speaking JSON lines on its
-- stdin/stdout. vt.game.remote{role=, profile=, options=} starts it; M.serve() is its main loop.

local Remote = {}
Remote.__index = Remote

function M.remote(options)
  options = check_options("vt.game.remote", options, {"role", "name", "profile", "options", "executable"})
  local role = options.role
  if role ~= "trainer" and role ~= "auditor" and role ~= "judge" then
    error("vt.game.remote: role must be \"trainer\", \"auditor\" or \"judge\", got " .. tostring(role), 2)
  end
  local argv = {options.executable or vt.executable()}
  if options.profile then argv[#argv + 1] = "--profile" argv[#argv + 1] = options.profile end
  argv[#argv + 1] = "-e"
  argv[#argv + 1] = "require('vt.game').serve()"
  local child = vt.process.spawn(argv)
  local self = setmetatable({kind = role, name = options.name or role, child = child}, Remote)
  local config = {role = role, name = self.name, options = options.options or {}}
  if options.profile then config.options.profile = config.options.profile or options.profile end
  child:send(json.encode(config))
  local line, why = child:receive(120)
  if line == nil then error("vt.game.remote: the " .. role .. " process did not start (" .. why .. ")", 2) end
  local hello = json.decode(line)
  if hello.error then error("vt.game.remote: the " .. role .. " process failed: " .. hello.error, 2) end
  self.pid = child:pid()
  return self
end

-- Sends the request text and waits for its reply, routing the party's own requests (to other
-- parties) through the network meanwhile. Returns the reply text and the seconds spent on
-- those nested requests (not counted against this party's deadline).
function Remote:deliver(text, deadline, net)
  self.child:send(text)
  local nested = 0
  local start = vt.clock()
  while true do
    local left = deadline - (vt.clock() - start - nested) + 1
    local line, why = self.child:receive(math.max(left, 0.01))
    if line == nil then
      if why == "timeout" then forfeit(self.name, "missed the deadline (no answer in " .. deadline .. " s)") end
      forfeit(self.name, "its process ended without answering")
    end
    local message = json.decode(line)
    if message.kind == "reply" then return line, nested end
    -- A request of the remote party to another party.
    local t = vt.clock()
    local ok, body = pcall(net.request, net, message.from, message.to, message.type, message.body)
    nested = nested + (vt.clock() - t)
    local reply = {kind = "reply", seq = message.seq, to = message.from}
    if ok then
      reply.body = body
    elseif M.is_forfeit(body) then
      reply.forfeit = {party = body.forfeit, reason = body.reason}
    else
      reply.error = tostring(body)
    end
    self.child:send(json.encode(reply))
  end
end

function Remote:close()
  self.child:close_input()
  return self.child:wait(30)
end

-- The remote side: read the configuration, build the party, answer requests until EOF.
function M.serve()
  io.stdout:setvbuf("full")
  local function send(t)
    io.stdout:write(json.encode(t), "\n")
    io.stdout:flush()
  end
  local config = json.decode(io.stdin:read("*l"))
  local o = config.options
  local ok, party = pcall(function()
    local store = vt.store.open(o.store)
    if config.role == "trainer" then
      return M.trainer{store = store, run = o.run, name = config.name, behaviour = o.behaviour}
    elseif config.role == "auditor" then
      return M.auditor{store = store, data = o.data, profile = o.profile, name = config.name, behaviour = o.behaviour}
    end
    return M.judge{store = store, data = o.data, profile = o.profile, name = config.name}
  end)
  if not ok then send{error = tostring(party)} return end
  -- Requests this party makes go out on stdout; their replies come back on stdin.
  local seq = 0
  party.net = {request = function(_, from, to, type_, body)
    seq = seq + 1
    local request = {kind = "request", game = party.current_game, seq = seq, from = from, to = to, type = type_, body = body or {}}
    party:record(party.current_game or "game", request)
    send(request)
    local reply = json.decode(io.stdin:read("*l"))
    party:record(party.current_game or "game", reply)
    return accept_reply(to, type_, reply)
  end}
  send{hello = config.role, pid = 0}
  for line in io.stdin:lines() do
    local request = json.decode(line)
    party.current_game = request.game
    io.stdout:write(party:deliver(line), "\n")
    io.stdout:flush()
  end
end

-- A one-paragraph summary of a verdict and the game's messages, for people.
function M.summary(verdict, net)
  local lines = {}
  local function add(fmt, ...) lines[#lines + 1] = string.format(fmt, ...) end
  add("outcome: %s", verdict.outcome)
  add("reason:  %s", verdict.reason or "")
  if verdict.interval and verdict.interval.leaf then
    add("disputed leaf %d: steps %d..%d, found in %d bisection rounds", verdict.interval.leaf,
        verdict.interval.first_step or 0, verdict.interval.last_step or 0, verdict.rounds or 0)
  end
  if verdict.judge_seconds then
    add("judge (%s) replayed %d steps in %.2f s", verdict.judge_profile or "?", verdict.replayed_steps or 0, verdict.judge_seconds)
  end
  if net then
    local bytes, by_type = 0, {}
    for _, m in ipairs(net.log) do
      bytes = bytes + m.bytes
      by_type[m.type] = (by_type[m.type] or 0) + 1
    end
    local parts = {}
    for t, c in pairs(by_type) do parts[#parts + 1] = t .. " x" .. c end
    table.sort(parts)
    add("%d messages (%s), %.1f KB", #net.log, table.concat(parts, ", "), bytes / 1024)
  end
  return table.concat(lines, "\n")
end

return M
