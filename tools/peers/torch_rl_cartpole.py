#!/usr/bin/python3
"""PyTorch peer of examples/rl/cartpole.c (make bench-rl): the same cart-pole (CartPole-v1's
physics, a continuous force of a x 10 N, 500 steps at most, reward 1 a step, the same initial
states and TD3 warm-up actions from the same generator), the same algorithm and
hyper-parameters (TD3: twin critics, target smoothing, policy delay 2, tau 0.005, Adam 1e-3,
batch 64, 1000 warm-up steps; SAC: the same buffer, batch and warm-up, alpha from 0.2 tuned
towards entropy -1 (Adam 3e-4), policy Adam 3e-4, critics 1e-3; PPO: rollouts of 1024 steps, 10 epochs of minibatches of 64,
clip 0.2, GAE lambda 0.95, vf_coef 0.5, log-std from -0.5 learned, Adam 3e-4 and 1e-3), MLPs
of two hidden ReLU layers of 64, one thread.

Usage: torch_rl_cartpole.py td3|sac|ppo [--steps N] [--seed S] [--solve]
Prints one JSON line with the fields the example prints (episodes, steps, updates, first10,
last10, solved_at, seconds, throughput = (environment steps + updates) per second).
"""
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

WARMUP = 1000


class CartPole:
    def __init__(self):
        self.rng = 12345

    def uniform(self, lo, hi):
        self.rng = (self.rng * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return lo + (hi - lo) * (self.rng >> 11) / 9007199254740992.0

    def reset(self):
        self.s = [self.uniform(-0.05, 0.05) for _ in range(4)]
        self.t = 0
        return list(self.s)

    def step(self, a):
        g, mc, mp, l, tau = 9.8, 1.0, 0.1, 0.5, 0.02
        x, x_dot, th, th_dot = self.s
        f = 10.0 * min(max(a, -1.0), 1.0)
        c, s = math.cos(th), math.sin(th)
        tmp = (f + mp * l * th_dot * th_dot * s) / (mc + mp)
        thacc = (g * s - c * tmp) / (l * (4.0 / 3.0 - mp * c * c / (mc + mp)))
        xacc = tmp - mp * l * thacc * c / (mc + mp)
        x += tau * x_dot
        x_dot += tau * xacc
        th += tau * th_dot
        th_dot += tau * thacc
        self.s = [x, x_dot, th, th_dot]
        self.t += 1
        trunc = self.t >= 500
        done = abs(x) > 2.4 or abs(th) > 12.0 * 2.0 * math.pi / 360.0 or trunc
        return list(self.s), done, trunc


def mlp(i, o, squash=False):
    layers = [nn.Linear(i, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, o)]
    if squash:
        layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def polyak(target, source, tau):
    with torch.no_grad():
        for p, q in zip(target.parameters(), source.parameters()):
            p.mul_(1.0 - tau).add_(q, alpha=tau)


class TD3:
    def __init__(self):
        self.actor, self.c1, self.c2 = mlp(4, 1, True), mlp(5, 1), mlp(5, 1)
        self.actor_t, self.c1_t, self.c2_t = mlp(4, 1, True), mlp(5, 1), mlp(5, 1)
        for t, s in ((self.actor_t, self.actor), (self.c1_t, self.c1), (self.c2_t, self.c2)):
            t.load_state_dict(s.state_dict())
        self.oa = torch.optim.Adam(self.actor.parameters(), 1e-3)
        self.o1 = torch.optim.Adam(self.c1.parameters(), 1e-3)
        self.o2 = torch.optim.Adam(self.c2.parameters(), 1e-3)
        n = 100000
        self.s, self.a = torch.zeros(n, 4), torch.zeros(n, 1)
        self.r, self.s2, self.d = torch.zeros(n, 1), torch.zeros(n, 4), torch.zeros(n, 1)
        self.n, self.pos, self.updates = 0, 0, 0

    def act(self, obs):
        with torch.no_grad():
            a = self.actor(torch.tensor([obs])).item()
        return min(max(a + 0.1 * torch.randn(()).item(), -1.0), 1.0)

    def record(self, obs, a, r, nxt, done):
        i = self.pos
        self.s[i], self.a[i, 0], self.r[i, 0] = torch.tensor(obs), a, r
        self.s2[i], self.d[i, 0] = torch.tensor(nxt), float(done)
        self.pos = (self.pos + 1) % self.s.shape[0]
        self.n = min(self.n + 1, self.s.shape[0])

    def ready(self):
        return self.n >= WARMUP

    def train(self):
        i = torch.randint(0, self.n, (64,))
        s, a, r, s2, d = self.s[i], self.a[i], self.r[i], self.s2[i], self.d[i]
        with torch.no_grad():
            noise = (0.2 * torch.randn(64, 1)).clamp(-0.5, 0.5)
            a2 = (self.actor_t(s2) + noise).clamp(-1.0, 1.0)
            sa2 = torch.cat([s2, a2], 1)
            y = r + 0.99 * (1.0 - d) * torch.min(self.c1_t(sa2), self.c2_t(sa2))
        sa = torch.cat([s, a], 1)
        for c, o in ((self.c1, self.o1), (self.c2, self.o2)):
            loss = F.mse_loss(c(sa), y)
            o.zero_grad()
            loss.backward()
            o.step()
        self.updates += 1
        if self.updates % 2 == 0:
            loss = -self.c1(torch.cat([s, self.actor(s)], 1)).mean()
            self.oa.zero_grad()
            loss.backward()
            self.oa.step()
            polyak(self.c1_t, self.c1, 0.005)
            polyak(self.c2_t, self.c2, 0.005)
            polyak(self.actor_t, self.actor, 0.005)


class SAC(TD3):
    def __init__(self):
        super().__init__()
        self.actor = mlp(4, 2)
        self.oa = torch.optim.Adam(self.actor.parameters(), 3e-4)
        self.log_alpha = torch.tensor([math.log(0.2)], requires_grad=True)
        self.oal = torch.optim.Adam([self.log_alpha], 3e-4)

    def sample(self, x):
        mu, ls = self.actor(x).chunk(2, -1)
        ls = ls.clamp(-20.0, 2.0)
        eps = torch.randn_like(mu)
        a = torch.tanh(mu + ls.exp() * eps)
        lp = (-0.5 * eps * eps - ls - 0.5 * math.log(2 * math.pi)
              - torch.log(1.0 - a * a + 1e-6)).sum(-1, keepdim=True)
        return a, lp

    def act(self, obs):
        with torch.no_grad():
            return self.sample(torch.tensor([obs]))[0].item()

    def train(self):
        i = torch.randint(0, self.n, (64,))
        s, a, r, s2, d = self.s[i], self.a[i], self.r[i], self.s2[i], self.d[i]
        alpha = self.log_alpha.exp().item()
        with torch.no_grad():
            a2, lp2 = self.sample(s2)
            sa2 = torch.cat([s2, a2], 1)
            y = r + 0.99 * (1.0 - d) * (torch.min(self.c1_t(sa2), self.c2_t(sa2)) - alpha * lp2)
        sa = torch.cat([s, a], 1)
        for c, o in ((self.c1, self.o1), (self.c2, self.o2)):
            loss = F.mse_loss(c(sa), y)
            o.zero_grad()
            loss.backward()
            o.step()
        pa, lp = self.sample(s)
        spa = torch.cat([s, pa], 1)
        loss = (alpha * lp - torch.min(self.c1(spa), self.c2(spa))).mean()
        self.oa.zero_grad()
        loss.backward()
        self.oa.step()
        loss = -(self.log_alpha * (lp.detach() - 1.0)).mean()
        self.oal.zero_grad()
        loss.backward()
        self.oal.step()
        polyak(self.c1_t, self.c1, 0.005)
        polyak(self.c2_t, self.c2, 0.005)
        self.updates += 1


class PPO:
    T = 1024

    def __init__(self):
        self.actor, self.value = mlp(4, 1), mlp(4, 1)
        self.log_std = nn.Parameter(torch.full((1,), -0.5))
        self.oa = torch.optim.Adam(list(self.actor.parameters()) + [self.log_std], 3e-4)
        self.ov = torch.optim.Adam(self.value.parameters(), 1e-3)
        T = self.T
        self.s, self.a, self.logp = torch.zeros(T, 4), torch.zeros(T, 1), torch.zeros(T)
        self.r, self.v, self.d = torch.zeros(T), torch.zeros(T), torch.zeros(T)
        self.t, self.updates = 0, 0

    def logprob(self, a, mu):
        z = (a - mu) / self.log_std.exp()
        return (-0.5 * z * z - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def act(self, obs):
        with torch.no_grad():
            x = torch.tensor([obs])
            mu = self.actor(x)
            a = mu + self.log_std.exp() * torch.randn_like(mu)
            self.last = (a, self.logprob(a, mu)[0], self.value(x)[0, 0])
        return a.item()

    def record(self, obs, a, r, nxt, done):
        t = self.t
        self.s[t], self.a[t], self.logp[t] = torch.tensor(obs), self.last[0][0], self.last[1]
        self.r[t], self.v[t], self.d[t] = r, self.last[2], float(done)
        self.next = nxt
        self.t += 1

    def ready(self):
        return self.t == self.T

    def train(self):
        with torch.no_grad():
            next_v = self.value(torch.tensor([self.next]))[0, 0]
        adv, ret, a = torch.zeros(self.T), torch.zeros(self.T), 0.0
        for t in reversed(range(self.T)):
            keep = 1.0 - self.d[t]
            delta = self.r[t] + 0.99 * next_v * keep - self.v[t]
            a = delta + 0.99 * 0.95 * keep * a
            adv[t], ret[t] = a, a + self.v[t]
            next_v = self.v[t]
        for _ in range(10):
            perm = torch.randperm(self.T)
            for k in range(0, self.T, 64):
                i = perm[k:k + 64]
                ad = adv[i]
                ad = (ad - ad.mean()) / (ad.std() + 1e-8)
                ratio = (self.logprob(self.a[i], self.actor(self.s[i])) - self.logp[i]).exp()
                pg = -torch.min(ratio * ad, ratio.clamp(0.8, 1.2) * ad).mean()
                vl = 0.5 * F.mse_loss(self.value(self.s[i])[:, 0], ret[i])
                self.oa.zero_grad()
                self.ov.zero_grad()
                (pg + vl).backward()
                self.oa.step()
                self.ov.step()
                self.updates += 1
        self.t = 0


def main():
    algo = sys.argv[1]
    steps, seed, solve = 20000, 1, False
    args = sys.argv[2:]
    for k, v in enumerate(args):
        if v == "--steps":
            steps = int(args[k + 1])
        elif v == "--seed":
            seed = int(args[k + 1])
        elif v == "--solve":
            solve = True
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    agent = {"td3": TD3, "sac": SAC, "ppo": PPO}[algo]()
    env = CartPole()
    returns, n, solved, ret = [], 0, -1, 0.0
    obs = env.reset()
    t0 = time.perf_counter()
    while n < steps:
        a = env.uniform(-1.0, 1.0) if algo != "ppo" and n < WARMUP else agent.act(obs)
        nxt, done, trunc = env.step(a)
        agent.record(obs, a, 1.0, nxt, done if algo == "ppo" else done and not trunc)
        ret += 1.0
        n += 1
        if agent.ready():
            agent.train()
        obs = nxt
        if not done:
            continue
        returns.append(ret)
        if solved < 0 and len(returns) >= 100 and sum(returns[-100:]) / 100 >= 475:
            solved = len(returns)
        if solve and solved >= 0:
            break
        ret = 0.0
        obs = env.reset()
    sec = time.perf_counter() - t0
    first, last = returns[:10], returns[-10:]
    print(json.dumps({"algo": algo, "episodes": len(returns), "steps": n,
                      "updates": agent.updates,
                      "first10": sum(first) / max(len(first), 1),
                      "last10": sum(last) / max(len(last), 1), "solved_at": solved,
                      "seconds": sec, "throughput": (n + agent.updates) / sec}))


if __name__ == "__main__":
    main()
