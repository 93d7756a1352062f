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
--
-- This file gathers the public API; the package holds the parts:
--   wire.lua        forfeits, the answer schemas, transcript entries, the network
--   party.lua       what every party shares; data sets from recipes
--   commitment.lua  the leaf schedule, Merkle roots and proofs of claimed leaves (vt.merkle),
--                   log digests, verify_leaf
--   trainer.lua, auditor.lua, judge.lua   the parties that answer requests
--   client.lua      the client and vt.game.play, the game it drives
--   remote.lua      parties in other vtrun processes (vt.game.remote, vt.game.serve)
--   summary.lua     the verdict for people
local auditor = require "vt.game.auditor"
local client = require "vt.game.client"
local commitment = require "vt.game.commitment"
local judge = require "vt.game.judge"
local party = require "vt.game.party"
local remote = require "vt.game.remote"
local summary = require "vt.game.summary"
local trainer = require "vt.game.trainer"
local util = require "vt.util"
local wire = require "vt.game.wire"

local M = {}

-- Shared with vt.calibrate, which now takes it from vt.util; kept here for compatibility.
M.check_options = util.check_options
M.data = party.data
M.interval = commitment.interval
M.merkle = commitment.merkle
M.network = wire.network
M.is_forfeit = wire.is_forfeit
M.is_full_leaf = wire.is_full_leaf
M.trainer = trainer.new
M.verify_leaf = commitment.verify_leaf
M.auditor = auditor.new
M.judge = judge.new
M.client = client.new
M.play = client.play
M.remote = remote.remote
M.serve = remote.serve
M.summary = summary.summary

return M
