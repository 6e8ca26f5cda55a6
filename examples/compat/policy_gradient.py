"""Policy-gradient reinforcement learning on CartPole (its dynamics written out in NumPy, so no gym):
an actor-critic network with a Categorical policy (probs from logits), log_prob / entropy, discounted
returns built backwards and normalised, an advantage baseline with smooth_l1_loss on the critic,
then a few PPO-style updates (probability ratios, clamp, torch.min) with an approximate KL check
between the old and new policies through torch.distributions.kl_divergence; a Normal policy head is
also exercised (rsample, log_prob.sum(-1), entropy, Independent).
"""
import math

import numpy as np

from _common import main, sync_init


class CartPole:
    """The classic control task: push a cart left/right to keep the pole upright (Barto et al. 1983)."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        costh, sinth = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sinth) / 1.1
        thetaacc = (9.8 * sinth - costh * temp) / (0.5 * (4.0 / 3.0 - 0.1 * costh ** 2 / 1.1))
        xacc = temp - 0.05 * thetaacc * costh / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * xacc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * thetaacc
        self.state = np.array([x, x_dot, theta, theta_dot])
        done = abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360
        return self.state.astype(np.float32), 1.0, done


def run(torch, nn, F, init=None, episodes=12, deterministic=False, log=print):
    torch.manual_seed(0)
    Categorical = torch.distributions.Categorical
    Normal = torch.distributions.Normal
    kl_divergence = torch.distributions.kl_divergence
    action_rng = np.random.RandomState(123)

    class ActorCritic(nn.Module):
        def __init__(self, obs=4, hidden=32, n_actions=2):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(obs, hidden), nn.Tanh())
            self.pi = nn.Linear(hidden, n_actions)
            self.v = nn.Linear(hidden, 1)
            self.mu = nn.Linear(hidden, 1)
            self.log_std = nn.Parameter(torch.zeros(1))

        def forward(self, obs):
            h = self.body(obs)
            return Categorical(logits=self.pi(h)), self.v(h).squeeze(-1)

        def continuous(self, obs):
            h = self.body(obs)
            return torch.distributions.Independent(Normal(self.mu(h), self.log_std.exp()), 1)

    model = ActorCritic()
    init_state = sync_init(torch, model, init)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    env = CartPole(0)
    gamma = 0.99
    ep_lengths, losses, kls = [], [], []
    for ep in range(episodes):
        obs_list, act_list = [], []
        rewards = []
        obs = env.reset()
        for t in range(200):
            obs_t = torch.from_numpy(obs).unsqueeze(0)
            with torch.no_grad():
                dist, _ = model(obs_t)
            if deterministic:   # the same uniform draw for both libraries: inverse-CDF sampling
                u = action_rng.rand()
                action = int((dist.probs.cumsum(-1)[0] < u).sum().item())
            else:
                action = dist.sample().item()
            obs_list.append(obs)
            act_list.append(action)
            obs, r, done = env.step(action)
            rewards.append(r)
            if done:
                break
        ep_lengths.append(len(rewards))
        returns, g = [], 0.0
        for r in reversed(rewards):
            g = r + gamma * g
            returns.insert(0, g)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + 1e-8) if len(returns) > 1 else returns
        obs_b = torch.from_numpy(np.stack(obs_list))
        act_b = torch.tensor(act_list)
        with torch.no_grad():
            old_dist, _ = model(obs_b)
            old_logp = old_dist.log_prob(act_b)
        # a few PPO-clip epochs over the episode
        for _ in range(3):
            dist, values = model(obs_b)
            logp = dist.log_prob(act_b)
            adv = (returns - values).detach()
            ratio = torch.exp(logp - old_logp)
            surr = torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv)
            loss = -surr.mean() + 0.5 * F.smooth_l1_loss(values, returns) - 0.01 * dist.entropy().mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
            losses.append(loss.item())
        with torch.no_grad():
            new_dist, _ = model(obs_b)
            kls.append(kl_divergence(old_dist, new_dist).mean().item())

    # the continuous head: reparameterised samples and their log-probabilities
    obs_b = torch.from_numpy(np.stack(obs_list[:8]))
    pdist = model.continuous(obs_b)
    a = pdist.rsample()
    cont_loss = -(pdist.log_prob(a.detach()) * 0.1).mean() + a.pow(2).mean() - 0.01 * pdist.entropy().mean()
    cont_loss.backward()
    assert model.log_std.grad is not None and a.shape == (8, 1) and pdist.log_prob(a).shape == (8,)
    n = Normal(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 2.0]))
    ref = {"log_prob": n.log_prob(torch.tensor([0.5, 0.5])).tolist(), "entropy": n.entropy().tolist(),
           "cdf": n.cdf(torch.tensor([0.5, 0.5])).tolist(), "mean": n.mean.tolist(), "stddev": n.stddev.tolist(),
           "kl": kl_divergence(n, Normal(torch.zeros(2), torch.ones(2))).tolist(),
           "cat_entropy": Categorical(probs=torch.tensor([0.2, 0.3, 0.5])).entropy().item()}
    log(f"episode lengths {ep_lengths}; last loss {losses[-1]:.3f}; mean KL {np.mean(kls):.5f}")
    return {"losses": losses, "lengths": ep_lengths, "kls": kls, "ref": ref, "init": init_state}


if __name__ == "__main__":
    main(run)
